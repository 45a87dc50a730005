// Health policy of the policy module (re-exported by index.ts).

import { align16 } from "./memory";

// ---------------------------------------------------------------------------------------------
// Health policy: a step function (state, probe result, time) → next state, with rise/fall
// counts and exponential backoff for backends that keep failing, so a flapping backend stays
// out of the table instead of churning it.
//
// Record at health_record_ptr() (32 bytes, host fills it, the step updates it in place):
//   0 state u32   4 consecutive_ok u32   8 consecutive_fail u32   12 strikes u32
//   16 hold_until_ms f64   24 active_since_ms f64

const HEALTH_NEW: u32 = 0;         // not yet judged: in the table only after `rise` oks
const HEALTH_ACTIVE: u32 = 1;      // serving, in the Maglev table
const HEALTH_QUARANTINED: u32 = 2; // out of the table until rise oks and the hold ends

export function health_record_ptr(): usize {
  // The first bytes of the heap; the Maglev area starts after them.
  return align16(__heap_base);
}

export function health_step(ok: u32, now_ms: f64, rise: u32, fall: u32, backoff_base_ms: f64, backoff_max_ms: f64): u32 {
  const r = health_record_ptr();
  let state = load<u32>(r);
  let oks = load<u32>(r, 4);
  let fails = load<u32>(r, 8);
  let strikes = load<u32>(r, 12);
  let holdUntil = load<f64>(r, 16);
  let activeSince = load<f64>(r, 24);
  if (rise == 0) rise = 1;
  if (fall == 0) fall = 1;

  if (ok != 0) {
    fails = 0;
    if (oks < 0xffffffff) oks++;
    if (state == HEALTH_ACTIVE) {
      // A backend that stayed up for a full max-backoff period is forgiven its past strikes.
      if (strikes > 0 && now_ms - activeSince >= backoff_max_ms) strikes = 0;
    } else if (oks >= rise && now_ms >= holdUntil) {
      state = HEALTH_ACTIVE;
      activeSince = now_ms;
      oks = 0;
    }
  } else {
    oks = 0;
    if (fails < 0xffffffff) fails++;
    if (state != HEALTH_QUARANTINED && fails >= fall) {
      // Each quarantine is a strike; the hold doubles per strike: base * 2^(strikes-1), capped.
      if (strikes < 32) strikes++;
      let backoff = backoff_base_ms;
      for (let s: u32 = 1; s < strikes && backoff < backoff_max_ms; s++) backoff *= 2;
      if (backoff > backoff_max_ms) backoff = backoff_max_ms;
      holdUntil = now_ms + backoff;
      state = HEALTH_QUARANTINED;
      fails = 0;
    }
  }

  store<u32>(r, state);
  store<u32>(r, oks, 4);
  store<u32>(r, fails, 8);
  store<u32>(r, strikes, 12);
  store<f64>(r, holdUntil, 16);
  store<f64>(r, activeSince, 24);
  return state;
}
