/**
 * Every cross-process format (docs/contracts.md "Format versions"): its version constant, the
 * module that is its one home, and a fixed sample encoded with its own encoder. `formats_test.ts`
 * compares each sample with `testdata/formats/<name>.v<version>.golden`; `formats_update.ts`
 * writes the golden of a version that has none and refuses to overwrite one.
 *
 * A sample is text: Redis and JSON forms as they are, binary forms as labelled hex. Scripts that
 * write a format in Redis are part of it (mixed versions run them on the same keys).
 *
 * @module
 */
import {
  decodeFlowValue,
  encodeFlowValue,
  EXPIRE_SCRIPT,
  FLOW_RECORDS_VERSION,
  LEARN_SCRIPT,
  PURGE_SCRIPT,
  STREAM_MAXLEN as FLOW_STREAM_MAXLEN,
  vipKeys,
} from "../../node/lb/flows/schema.ts";
import { flowField } from "../../node/lb/flows/field.ts";
import {
  encodeEntry,
  MODEL_VERSION,
  modelKeys,
  POLICY_SCRIPT,
  SETTINGS_SCRIPT,
  SNAPSHOT_SCRIPT,
  STREAM_MAXLEN as MODEL_STREAM_MAXLEN,
  WRITE_SCRIPT,
} from "../../controller/model/schema.ts";
import { encodeSettings, SETTINGS_VERSION } from "../../controller/model/settings.ts";
import {
  encodeReport,
  REPORTS_MAXLEN,
  REPORTS_VERSION,
  reportsKey,
} from "../../controller/model/reports.ts";
import { parseEgressConfig } from "../../controller/egress/config.ts";
import {
  EGRESS_CONFIG_VERSION,
  egressConfigKey,
  publishEgressConfigArgs,
} from "../../controller/egress/redis_config.ts";
import { LEASE_SCRIPTS, LEASE_VERSION, RedisLeaseStore } from "../../controller/egress/lease.ts";
import { OWNERS_SCRIPTS, OWNERS_VERSION, ownersKeys } from "../../controller/egress/owners.ts";
import type { RedisConnection } from "../../lib/redis_connection.ts";
import { encodeHeartbeat, HEARTBEAT_VERSION } from "../../node/egress/_health_wire.ts";
import {
  encodeAck,
  encodeBegin,
  encodeEnd,
  encodeEntries,
  encodeHello,
  FRAME,
  SYNC_WIRE_VERSION,
} from "../../node/egress/_sync_wire.ts";
import {
  BPF_MAPS_VERSION,
  encodeBackendValue,
  encodeDecapConfig,
  encodeLbConfig,
  encodeServiceKey,
  encodeServiceValue,
} from "../../node/bpf/structs.ts";
import {
  encodeBackendValue6,
  encodeFlowKey6,
  encodeFlowValue6,
  encodeLbConfig6,
  encodeServiceKey6,
  encodeVip6Key,
} from "../../node/bpf/structs6.ts";
import {
  FLOW_KEY_SIZE,
  FLOW_VALUE_SIZE,
  writeFlowKey,
  writeFlowValue,
} from "../../node/bpf/flow.ts";
import { encodeNodeSvcKey, encodeNodeSvcValue } from "../../node/bpf/node_structs.ts";
import { LB_PINNED_MAPS } from "../../node/bpf/datapath.ts";
import { NODE_PINNED_MAPS } from "../../node/bpf/node_datapath.ts";
import {
  ABI_VERSION,
  HealthState,
  MAGLEV_ERRORS,
  MAGLEV_M_DEFAULT,
  MAGLEV_M_MAX,
  MAGLEV_M_MIN,
  OPTIONAL_EXPORTS,
  REQUIRED_EXPORTS,
} from "../../policy-as/host/abi.ts";
import { mapDefinitions } from "./_bpf_map_defs.ts";

/** One format: name (the golden's file name), version, home module, sample. */
export interface Format {
  readonly name: string;
  readonly version: number;
  /** The module holding the version constant and the encoder. */
  readonly home: string;
  /** The fixed sample, encoded with the format's encoder. */
  readonly sample: () => string;
}

const hex = (b: Uint8Array): string =>
  Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
const lines = (...parts: [string, string | Uint8Array][]): string =>
  parts.map(([label, v]) => `${label}: ${typeof v === "string" ? v : hex(v)}`).join("\n") + "\n";
const ROOT = new URL("../../", import.meta.url).pathname;

function flowMapBytes(): Uint8Array {
  const b = new Uint8Array(FLOW_KEY_SIZE + FLOW_VALUE_SIZE);
  const v = new DataView(b.buffer);
  writeFlowKey(v, 0, { saddr: 0x0a000001, daddr: 0x0a006401, sport: 40000, dport: 80, proto: 6 });
  writeFlowValue(v, FLOW_KEY_SIZE, { backend: 0x0a010003, flags: 1, lastSeenNs: 123456789 });
  return b;
}

/** No connection: the lease store is only asked for its key names. */
const NO_REDIS = {} as RedisConnection;

/** The formats, in docs/contracts.md's order. */
export const FORMATS: readonly Format[] = [
  {
    name: "flow-records",
    version: FLOW_RECORDS_VERSION,
    home: "node/lb/flows/schema.ts",
    sample: () =>
      lines(
        ["keys", JSON.stringify(vipKeys("10.0.100.1"))],
        ["keys6", JSON.stringify(vipKeys("2001:db8:100::1"))],
        [
          "field",
          flowField({ saddr: 0x0a000001, daddr: 0x0a006401, sport: 40000, dport: 80, proto: 6 }),
        ],
        [
          "field6",
          flowField({
            saddr: "2001:db8::7",
            daddr: "2001:db8:100::1",
            sport: 0,
            dport: 53,
            proto: 17,
          }),
        ],
        ["value", encodeFlowValue(0x0a010003, 1700000000000)],
        ["value6", encodeFlowValue("2001:db8:1::3", 1700000000123)],
        ["stream maxlen", String(FLOW_STREAM_MAXLEN)],
        ["learn script", JSON.stringify(LEARN_SCRIPT)],
        ["expire script", JSON.stringify(EXPIRE_SCRIPT)],
        ["purge script", JSON.stringify(PURGE_SCRIPT)],
        // The previous version's value still reads (v1: with the epoch).
        ["v1 value read", JSON.stringify(decodeFlowValue("0a010003:0:1700000000000"))],
      ),
  },
  {
    name: "model",
    version: MODEL_VERSION,
    home: "controller/model/schema.ts",
    sample: () =>
      lines(
        ["keys", JSON.stringify(modelKeys())],
        [
          "entry",
          encodeEntry({
            service: {
              name: "default/web",
              flowKeyMode: "five-tuple",
              maglevSize: 251,
              healthCheck: {
                kind: "http",
                port: 0,
                path: "/healthz",
                expectStatus: 200,
                intervalMs: 1000,
                timeoutMs: 500,
                rise: 2,
                fall: 3,
                backoffBaseMs: 1000,
                backoffMaxMs: 30000,
              },
              frontends: [{ address: "10.0.100.1:80/TCP", portName: "http" }],
            },
            backends: [
              { address: "10.1.0.4:8080/TCP", portName: "http", state: "terminating", weight: 50 },
              { address: "10.1.0.3:8080/TCP", portName: "http", zone: "a" },
            ],
          }),
        ],
        ["stream maxlen", String(MODEL_STREAM_MAXLEN)],
        ["write script", JSON.stringify(WRITE_SCRIPT)],
        ["policy script", JSON.stringify(POLICY_SCRIPT)],
        ["settings script", JSON.stringify(SETTINGS_SCRIPT)],
        ["snapshot script", JSON.stringify(SNAPSHOT_SCRIPT)],
      ),
  },
  {
    name: "model-settings",
    version: SETTINGS_VERSION,
    home: "controller/model/settings.ts",
    sample: () =>
      lines(
        ["empty", encodeSettings({})],
        [
          "full",
          encodeSettings({
            encapPort: 6081,
            lbNodes: ["lb-b", "lb-a", "lb-a"],
            bgp: { refused: "no peers" },
          }),
        ],
      ),
  },
  {
    name: "reports",
    version: REPORTS_VERSION,
    home: "controller/model/reports.ts",
    sample: () =>
      lines(
        ["key", reportsKey()],
        ["maxlen", String(REPORTS_MAXLEN)],
        [
          "health",
          JSON.stringify(encodeReport({
            kind: "health",
            node: "lb-a",
            service: "default/web",
            backend: "10.1.0.3:8080",
            state: "unhealthy",
            reason: "3 failed probes (connect refused)",
          })),
        ],
        [
          "policy",
          JSON.stringify(encodeReport({
            kind: "policy",
            node: "lb-a",
            sha256: "ab".repeat(32),
            reason: "abi_version() is 2",
          })),
        ],
      ),
  },
  {
    name: "egress-config",
    version: EGRESS_CONFIG_VERSION,
    home: "controller/egress/redis_config.ts",
    sample: () => {
      const config = parseEgressConfig({
        name: "default/egress",
        destinations: ["198.18.0.0/24"],
        addresses: [{ address: "198.18.0.100", gateway: "10.8.0.100" }],
        sources: [{ prefix: "10.8.0.11/32" }],
        peers: [{ name: "nat1", address: "10.8.0.21" }, { name: "nat2", address: "10.8.0.22" }],
        snatPorts: "10000-29999",
        bgp: {
          localAsn: 65100,
          peers: [{ address: "198.18.0.1", asn: 65000, bfd: { intervalMs: 100, multiplier: 3 } }],
          communities: ["65000:100"],
        },
      });
      return lines(
        ["key", egressConfigKey(config.name)],
        [
          "publish",
          JSON.stringify(publishEgressConfigArgs(config, undefined, [{
            pod: "shop/web-1",
            node: "n1",
            ips: ["10.8.0.11", "fd00:8::11"],
            address: "198.18.0.100",
          }])),
        ],
      );
    },
  },
  {
    name: "egress-leases",
    version: LEASE_VERSION,
    home: "controller/egress/lease.ts",
    sample: () =>
      lines(
        [
          "keys",
          JSON.stringify(new RedisLeaseStore(NO_REDIS, "default/egress").keys("198.18.0.100")),
        ],
        ...Object.entries(LEASE_SCRIPTS).map((
          [k, v],
        ): [string, string] => [`script ${k}`, JSON.stringify(v)]),
      ),
  },
  {
    name: "egress-owners",
    version: OWNERS_VERSION,
    home: "controller/egress/owners.ts",
    sample: () =>
      lines(
        ["keys", JSON.stringify(ownersKeys("default/egress"))],
        ...Object.entries(OWNERS_SCRIPTS).map((
          [k, v],
        ): [string, string] => [`script ${k}`, JSON.stringify(v)]),
      ),
  },
  {
    name: "egress-heartbeat",
    version: HEARTBEAT_VERSION,
    home: "node/egress/_health_wire.ts",
    sample: () =>
      lines([
        "heartbeat",
        encodeHeartbeat({ name: "nat1", seq: 42, boot: "b00t", draining: true }),
      ]),
  },
  {
    name: "egress-sync-wire",
    version: SYNC_WIRE_VERSION,
    home: "node/egress/_sync_wire.ts",
    sample: () => {
      const entry = {
        orig: { src: 0x0a08000b, dst: 0xc6120005, sport: 40000, dport: 443, proto: 6 as const },
        reply: { src: 0xc6120005, dst: 0xc6120064, sport: 443, dport: 12345, proto: 6 as const },
        status: 0x1be,
        timeoutS: 431999,
        tcpState: 3,
        natSrc: { addr: 0xc6120064, port: 12345 },
        mark: 7,
      };
      return lines(
        ["hello", encodeHello("nat1")],
        ["ack", encodeAck(3)],
        ["begin", encodeBegin(9)],
        ["end", encodeEnd(9, [0xc6120064, 0xc6120065])],
        ["upsert", encodeEntries(FRAME.UPSERT, [entry])],
        ["remove", encodeEntries(FRAME.REMOVE, [entry])],
      );
    },
  },
  {
    name: "bpf-maps",
    version: BPF_MAPS_VERSION,
    home: "node/bpf/structs.ts",
    sample: () =>
      lines(
        ["service_key", encodeServiceKey("10.0.100.1", 80, 6)],
        [
          "service_value",
          encodeServiceValue({ serviceId: 3, backendCount: 2, flags: 1, maglevSize: 251 }),
        ],
        ["backend_value", encodeBackendValue("10.1.0.3", 8080)],
        [
          "lb_config",
          encodeLbConfig({ srcAddr: "10.0.0.2", encapPort: 6081, seed: 7, eventBudget: 100 }),
        ],
        ["decap_config", encodeDecapConfig({ encapPort: 6081, mssMax: 1432 })],
        ["flow_key + flow_value", flowMapBytes()],
        ["service_key6", encodeServiceKey6("2001:db8:100::1", 443, 6)],
        ["backend_value6", encodeBackendValue6("2001:db8:1::3", 8443)],
        ["lb_config6", encodeLbConfig6("2001:db8::2")],
        ["vip6_key", encodeVip6Key("2001:db8:100::1")],
        [
          "flow_key6",
          encodeFlowKey6({
            saddr: "2001:db8::7",
            daddr: "2001:db8:100::1",
            sport: 40000,
            dport: 443,
            proto: 6,
          }),
        ],
        ["flow_value6", encodeFlowValue6({ backend: "10.1.0.3", flags: 1, lastSeenNs: 123456789 })],
        [
          "node_svc_key",
          encodeNodeSvcKey({ pod: "10.1.0.3", vip: "10.0.100.1", port: 80, proto: 6 }),
        ],
        ["node_svc_value", encodeNodeSvcValue(8080)],
        ...mapDefinitions(`${ROOT}bpf/build/lb_xdp.o`, LB_PINNED_MAPS).map((
          d,
        ): [string, string] => ["lb_xdp.o", d]),
        ...mapDefinitions(`${ROOT}bpf/build/node_tc.o`, NODE_PINNED_MAPS).map((
          d,
        ): [string, string] => ["node_tc.o", d]),
      ),
  },
  {
    name: "policy-abi",
    version: ABI_VERSION,
    home: "policy-as/host/abi.ts",
    sample: () =>
      lines(
        ["required exports", JSON.stringify(REQUIRED_EXPORTS)],
        ["optional exports", JSON.stringify(OPTIONAL_EXPORTS)],
        ["maglev errors", JSON.stringify(MAGLEV_ERRORS)],
        ["maglev M", JSON.stringify([MAGLEV_M_MIN, MAGLEV_M_MAX, MAGLEV_M_DEFAULT])],
        ["health states", JSON.stringify(HealthState)],
      ),
  },
];

/** The goldens' directory in the repository. */
export const GOLDEN_DIR = `${ROOT}tests/hygiene/testdata/formats`;

/** Where the golden of `name` at `version` lives (in `dir`, default {@link GOLDEN_DIR}). */
export function goldenPath(name: string, version: number, dir = GOLDEN_DIR): string {
  return `${dir}/${name}.v${version}.golden`;
}

/** What differs between the formats' samples and their goldens: one line per format, naming it. */
export async function checkFormats(formats: readonly Format[]): Promise<string[]> {
  const problems: string[] = [];
  for (const f of formats) {
    const path = goldenPath(f.name, f.version);
    let golden: string;
    try {
      golden = await Deno.readTextFile(path);
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound)) throw err;
      problems.push(
        `format "${f.name}" v${f.version} (${f.home}) has no golden ${path}: write it with ` +
          "`./hf deno run -P=netns --allow-write=tests/hygiene/testdata/formats tests/hygiene/formats_update.ts`",
      );
      continue;
    }
    const got = f.sample();
    if (got !== golden) {
      const a = got.split("\n"), b = golden.split("\n");
      const i = a.findIndex((l, n) => l !== b[n]);
      problems.push(
        `format "${f.name}" (${f.home}) encodes differently from its v${f.version} golden ` +
          `(first at "${(a[i] ?? "").slice(0, 60)}"): a format change needs a new version ` +
          "constant, a new golden and a CHANGELOG.md entry (readers of the previous version kept)",
      );
    }
  }
  return problems;
}
