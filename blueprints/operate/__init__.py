"""After `pulumi up`: verify a deployed stack (endpoint, metrics, scaler, alerts, nodes) and benchmark it with the
planned workload (its result file: `blueprints.contracts.benchmark_result`).

May import `blueprints.review`, `blueprints.plan` and below; talks to the deployment (Pulumi CLI, Kubernetes API,
Prometheus, AWS) only through the clients handed to it, so every check runs offline against stand-ins.
"""
