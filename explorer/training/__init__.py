"""Training: settings <-> TrainConfig, inputs and batch plans, the schedule, distributed data parallel, the trainer, and jobs (the trainer as a subprocess)."""
