from dpsynth.cli import main

raise SystemExit(main())
