from spurctl.cli import main

main()
