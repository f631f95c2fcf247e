"""Tests of the project as a whole: import layering (also enforced by lint-imports in CI), the wheel's
package list, the README's set-up commands and the examples/ scripts."""
