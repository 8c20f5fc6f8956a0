"""Development tools: the simulated cluster's launcher, the DCGM exporter simulator and the
Prometheus launcher. Used by the run command, the tests and the benchmarks; never by the portal."""
