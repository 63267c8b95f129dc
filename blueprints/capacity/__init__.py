"""The LLM capacity model: how one vLLM replica behaves under load, and how the planner sizes replicas from it.

Modules, from physics up:
- `physics`: one replica's engine step, frontend and memory (over `blueprints.contracts.memory`), its step source
  and calibration correction; `measured`: the measured vLLM kernel tables (`catalog/step_tables/`); `roofline`: the
  bandwidth/FLOPs step time where the tables have none.
- `workload`: seeded arrivals per traffic pattern and request-length distributions.
- `simulator`: a discrete-event simulation of vLLM's scheduler stepping on `physics`; TTFT/ITL/e2e percentiles.
- `analytic`: the mean-value model (fast, monotone), used to screen candidates and as `sizing.estimate_llm`.
- `sizing`: `estimate_llm` and the non-generative work per request (encoder FLOPs, batch and CPU times).
- `replica`: one planned replica under load (capacity, p95 at a rate, the autoscaler's signal), for scaling and
  the fleet simulation.
- `runs`: closed-loop (fixed concurrency) and open-loop (arrival rate) runs with engine defaults.
- `planning`: engine limits and the highest per-replica rate that meets the SLO, for `blueprints.plan.options.llm.llm_search`.
- `calibration`: the published measurements (`catalog/calibration-points*.yaml`), their predictions and the error per
  regime and step source.
- `fitting`: the fitted constants (bounds, prior, the points each moves), the fit on every point and the
  leave-one-source-group-out cross-validation committed in `catalog/capacity-fit.yaml`; each other engine's own
  constants, fitted and cross-validated on its points alone, in `catalog/engine-fit.yaml`.
- `uncertainty`: the cross-validated band every LLM prediction carries and the margin an uncalibrated production
  plan is sized with.
- `whatif`: `blueprint estimate`.

Pure: no clock, no network, no unseeded randomness; the same inputs give the same numbers.
May import `blueprints.contracts` and below; never the planner, the simulation, the review or `components`.
"""
