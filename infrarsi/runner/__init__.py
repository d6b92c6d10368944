"""Running one candidate of a training job for real, in isolation, and measuring it."""
