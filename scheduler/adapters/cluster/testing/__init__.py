"""Test support that runs outside pytest too: the emulated Kubernetes API server used by the
tests, `bench_cycle --backend kubernetes` and `deploy/smoke.sh` in CI. Needs the dev
requirements (kmock); nothing in the runtime packages imports it."""
