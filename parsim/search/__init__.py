"""Search: the stage partitioner (and, with the planner, the strategy search) drive the simulator."""
