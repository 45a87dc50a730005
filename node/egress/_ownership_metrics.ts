/**
 * The egress ownership's metrics, registered by the coordinator (`ownership.ts`) and written by
 * each address's lease (`address_lease.ts`).
 *
 * @module
 */

import type { Counter, Gauge, Registry } from "../../lib/metrics.ts";

/** The metrics of the ownership. */
export interface OwnershipMetrics {
  readonly owner: Gauge;
  readonly epoch: Gauge;
  readonly takeovers: Counter;
  readonly renewFailures: Counter;
}

/**
 * Registers (or finds) the ownership's metrics in `reg`: `holdfast_egress_owner{address}` (1/0,
 * set when the assume or forfeit callback starts), `holdfast_egress_epoch{address}`,
 * `holdfast_egress_takeovers_total{reason}`, `holdfast_egress_lease_renew_failures_total`.
 */
export function ownershipMetrics(reg: Registry): OwnershipMetrics {
  return {
    owner: reg.gauge("holdfast_egress_owner", "1 while this pod holds the address.", {
      labelNames: ["address"],
    }),
    epoch: reg.gauge("holdfast_egress_epoch", "Fencing epoch of the address's lease here.", {
      labelNames: ["address"],
    }),
    takeovers: reg.counter("holdfast_egress_takeovers_total", "Addresses assumed, by reason.", {
      labelNames: ["reason"],
    }),
    renewFailures: reg.counter(
      "holdfast_egress_lease_renew_failures_total",
      "Lease renewals that got no answer (Redis unreachable or slow).",
    ),
  };
}
