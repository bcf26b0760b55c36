"""What is measured: models (the catalogue, a spec resolved and built, on meta for the counts), their inputs
(the inputs object, shapes and schedules), and the parameter / FLOP / MAC analysis per layer."""
