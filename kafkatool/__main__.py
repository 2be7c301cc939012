from kafkatool.cli.main import main

main()
