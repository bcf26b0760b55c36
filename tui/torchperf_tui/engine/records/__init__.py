"""What is kept: the history file and its records, comparisons of two records, exports, the environment
fingerprint, and how files are written safely."""
