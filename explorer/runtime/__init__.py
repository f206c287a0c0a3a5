"""The ground floor for how computations run, beside what they compute: which device and how many
threads (device.py), the compute queue every user's computation waits in (compute_queue.py), CPU
priority for background work (priority.py), progress and cancelling of long analyses (progress.py),
eval mode restored after a block (modes.py), and other processes and free memory on any OS
(processes.py). Imports nothing else of the library."""
