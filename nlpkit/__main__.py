from nlpkit.cli.main import main

main()
