/**
 * The health step in plain TypeScript, the same function as the module's `health_step`: the
 * reference the golden health vectors come from.
 *
 * - New or Quarantined → Active after `rise` consecutive successes, but never before the hold
 *   (`holdUntilMs`) has passed.
 * - New or Active → Quarantined after `fall` consecutive failures; each quarantine is a strike
 *   and holds the backend out for `backoffBaseMs * 2^(strikes-1)`, capped at `backoffMaxMs`.
 * - Staying Active for `backoffMaxMs` forgives all strikes (checked on a successful probe).
 *
 * @module
 */
import { type HealthProbe, type HealthRecord, HealthState } from "./abi.ts";

/** Applies one probe result to `rec` (in place) and returns the new state. */
export function healthStepTs(rec: HealthRecord, probe: HealthProbe): HealthRecord["state"] {
  const { nowMs, params } = probe;
  const rise = params.rise === 0 ? 1 : params.rise;
  const fall = params.fall === 0 ? 1 : params.fall;
  if (probe.ok) {
    rec.consecutiveFail = 0;
    if (rec.consecutiveOk < 0xffffffff) rec.consecutiveOk++;
    if (rec.state === HealthState.Active) {
      if (rec.strikes > 0 && nowMs - rec.activeSinceMs >= params.backoffMaxMs) rec.strikes = 0;
    } else if (rec.consecutiveOk >= rise && nowMs >= rec.holdUntilMs) {
      rec.state = HealthState.Active;
      rec.activeSinceMs = nowMs;
      rec.consecutiveOk = 0;
    }
  } else {
    rec.consecutiveOk = 0;
    if (rec.consecutiveFail < 0xffffffff) rec.consecutiveFail++;
    if (rec.state !== HealthState.Quarantined && rec.consecutiveFail >= fall) {
      if (rec.strikes < 32) rec.strikes++;
      let backoff = params.backoffBaseMs;
      for (let s = 1; s < rec.strikes && backoff < params.backoffMaxMs; s++) backoff *= 2;
      if (backoff > params.backoffMaxMs) backoff = params.backoffMaxMs;
      rec.holdUntilMs = nowMs + backoff;
      rec.state = HealthState.Quarantined;
      rec.consecutiveFail = 0;
    }
  }
  return rec.state;
}
