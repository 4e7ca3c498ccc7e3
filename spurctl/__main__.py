from spurctl.cli import entry

entry()
