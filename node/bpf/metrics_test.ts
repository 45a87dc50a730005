import { strictEqual } from "node:assert/strict";
import { Registry } from "../../lib/metrics.ts";
import { type DatapathCounters, exportDatapathMetrics } from "./metrics.ts";
import type { LbStats } from "./structs.ts";
import { type Reason, REASONS } from "./consts.ts";

/** In-memory stand-in for Datapath's counters (the real one is tested in tests/bpf). */
class FakeCounters implements DatapathCounters {
  r = Object.fromEntries(REASONS.map((n) => [n, 0n])) as Record<Reason, bigint>;
  fe = new Map<number, LbStats>();
  be = new Map<number, bigint>();
  reasons() {
    return { ...this.r };
  }
  frontendStats() {
    return new Map(this.fe);
  }
  backendNewFlows() {
    return new Map(this.be);
  }
}

Deno.test("datapath counters are exposed as Prometheus counters, read at scrape time", () => {
  const src = new FakeCounters();
  const reg = new Registry();
  exportDatapathMetrics(src, reg);
  src.r.tx_hit = 10n;
  src.fe.set(3, { packets: 12n, bytes: 1200n, newFlows: 2n, drops: 1n });
  src.be.set(7, 2n);
  let text = reg.expose();
  strictEqual(text.includes('holdfast_datapath_packets_total{reason="tx_hit"} 10'), true, text);
  strictEqual(
    text.includes('holdfast_datapath_frontend_bytes_total{service_id="3"} 1200'),
    true,
    text,
  );
  strictEqual(
    text.includes('holdfast_datapath_backend_new_flows_total{backend_id="7"} 2'),
    true,
    text,
  );
  src.r.tx_hit = 15n;
  text = reg.expose();
  strictEqual(text.includes('holdfast_datapath_packets_total{reason="tx_hit"} 15'), true, text);
  // maps recreated (reload): the counter keeps going up from where it was
  src.r.tx_hit = 4n;
  text = reg.expose();
  strictEqual(text.includes('holdfast_datapath_packets_total{reason="tx_hit"} 19'), true, text);
});
