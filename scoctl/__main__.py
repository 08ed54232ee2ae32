from scoctl.cli.app import main

main()
