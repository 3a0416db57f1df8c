"""What runs: the processes of an environment, from ``/proc`` (read only), and bytecode habits
(:mod:`.running`)."""
