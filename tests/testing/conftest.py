"""Tests of popvision_lite/testing: the synthetic profiles respect the device specs and are consistent;
the microbenchmarks reproduce the rates the specs claim."""
