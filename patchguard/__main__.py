from patchguard.cli import main

main()
