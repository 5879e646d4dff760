from flamingo_sim.cli import main

raise SystemExit(main())
