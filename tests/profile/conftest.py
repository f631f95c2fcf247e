"""Tests of popvision_lite/profile: the format round trip, old (v1) files in tests/fixtures/v1, every kind
of bad or hostile file (a ProfileError naming the file and the problem), the consistency validator and the
Chrome-trace / CSV exports loaded back."""
