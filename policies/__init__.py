"""CrossGuard policy pack of serving blueprints; the rules live in `policies.rules`."""
