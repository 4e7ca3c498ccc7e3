"""The use cases: each command's whole job as one library call (sources in, a result out),
joining sources/, decide/, act/ and render/'s inputs; cli.py and demo.py call them."""
