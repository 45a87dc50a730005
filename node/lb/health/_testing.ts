/**
 * Test helpers for health probing.
 *
 * @module
 */
import { HEALTH_CHECK_DEFAULTS, type HealthCheck } from "../sources/health_check.ts";

/** A TCP check every 10 ms, rise 2, fall 3, no backoff hold: verdicts within milliseconds. */
export const FAST_CHECK: Readonly<HealthCheck> = Object.freeze({
  ...HEALTH_CHECK_DEFAULTS,
  kind: "tcp",
  intervalMs: 10,
  timeoutMs: 10,
  rise: 2,
  fall: 3,
  backoffBaseMs: 0,
  backoffMaxMs: 0,
});
