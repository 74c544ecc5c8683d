"""The reliability model: failures, recovery and goodput of a training job, joined into time-to-train.

Pure functions, each citing its formula: failure rates per component and the MTTF of a job of N GPUs
(:mod:`~slowlink.reliability.failures`); what one interruption costs (:mod:`~slowlink.reliability.recovery`);
the checkpoint interval optimum (Young 1974, Daly 2006) and the effective training time ratio in closed
form and by seeded Monte Carlo (:mod:`~slowlink.reliability.ettr`); time and GPU-hours to train a token
budget from the step and storage models (:mod:`~slowlink.reliability.goodput`); and the check against
published reliability figures (:mod:`~slowlink.reliability.validate`).
"""
