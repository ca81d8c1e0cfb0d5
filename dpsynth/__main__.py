from dpsynth.cli.commands import main

raise SystemExit(main())
