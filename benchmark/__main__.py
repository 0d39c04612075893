from benchmark.cli import main

raise SystemExit(main())
