/**
 * What a data source writes through its `SourceWriter`: services with their frontends,
 * and each service's backends. `writer.ts` re-exports them.
 *
 * @module
 */

import type { FlowKeyMode } from "../maps/lbmaps.ts";
import type { HealthCheck } from "../sources/health_check.ts";
import type { BackendState } from "./backend.ts";

/** A service as a source describes it, with its frontends. */
export interface ServiceInput {
  /** `namespace/name`. */
  readonly name: string;
  readonly flowKeyMode?: FlowKeyMode;
  /** Maglev table size (prime); omitted: the reconciler's default. */
  readonly maglevSize?: number;
  /** No new TCP connections (`Service.draining`); omitted: false. */
  readonly draining?: boolean;
  /** Active health check the LB nodes run (carried to agents in the model). */
  readonly healthCheck?: HealthCheck;
  readonly frontends: readonly FrontendInput[];
}

/** A frontend of a {@linkcode ServiceInput}. */
export interface FrontendInput {
  /** `IP:PORT/PROTO`. */
  readonly address: string;
  readonly portName?: string;
}

/** A backend as a source reports it for one service. */
export interface BackendInput {
  /** `IP:PORT/PROTO`. */
  readonly address: string;
  readonly portName?: string;
  readonly state?: BackendState;
  readonly weight?: number;
  readonly zone?: string;
}
