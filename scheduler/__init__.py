"""The scheduler: a pure decision core (scheduler.core) and its shell (scheduler.adapters)."""
