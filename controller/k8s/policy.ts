/**
 * The controller's side of the policy in the cluster: it watches the ConfigMap
 * (`--policy-configmap`, key `policy.wasm` in `binaryData`), validates each new module exactly as
 * `main.ts policy check` does (ABI, golden vectors, memory and time limits), keeps the last
 * accepted one as the active module, and reports a rejected one as a `PolicyRejected` Warning
 * Event on the ConfigMap (an accepted one as `PolicyValidated`), so `kubectl describe cm` says
 * why a swap did not take. Agents cannot write Events (least privilege), so the controller does.
 *
 * Validation is serialized; a module is validated once per content (SHA-256).
 *
 * @module
 */

import { log, type Logger } from "../../lib/log.ts";
import { type Registry, registry as processRegistry } from "../../lib/metrics.ts";
import {
  loadVectors,
  PolicyRejectedError,
  type PolicyVectors,
  validatePolicyModule,
} from "../../policy-as/host/mod.ts";
import { sha256Hex } from "../model/schema.ts";
import type { KubeObject } from "./objects.ts";
import type { ClusterWriter } from "./status.ts";

/** The ConfigMap key of the module. */
export const POLICY_KEY = "policy.wasm";

/** The checker's metric, on `registry` (lib/metrics.ts: registered per instance). */
const validationsCounter = (registry: Registry) =>
  registry.counter(
    "holdfast_controller_policy_validations_total",
    "Policy modules validated from the ConfigMap, by result (accepted, rejected)",
    { labelNames: ["result"] },
  );

/** Validates module bytes; resolves with the module's digest or throws PolicyRejectedError. */
export type PolicyValidator = (bytes: Uint8Array) => Promise<string>;

/** The default validator: `policy-as/host` validation against the golden vectors. */
export function defaultValidator(): PolicyValidator {
  let vectors: Promise<PolicyVectors> | undefined;
  return async (bytes) => {
    vectors ??= loadVectors();
    const { report } = await validatePolicyModule(bytes, await vectors);
    return report.digest;
  };
}

function moduleBytes(cm: KubeObject): Uint8Array | undefined {
  const b64: unknown = cm.binaryData?.[POLICY_KEY];
  if (typeof b64 !== "string") return undefined;
  const bin = atob(b64);
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}

/** Options of {@linkcode PolicyChecker}. */
export interface PolicyCheckerOptions {
  writer: ClusterWriter;
  /** Events are written only while leading (default: always). */
  isLeader?: () => boolean;
  validate?: PolicyValidator;
  logger?: Logger;
  /** Where its metrics go (default the process registry, served at `/metrics`). */
  registry?: Registry;
}

/** Validates the policy ConfigMap's module on every change; see the module doc. */
export class PolicyChecker {
  readonly #o: PolicyCheckerOptions;
  readonly #log: Logger;
  readonly #validate: PolicyValidator;
  readonly #validations: ReturnType<typeof validationsCounter>;
  #seen = "";
  #active: string | undefined;
  #activeWasm: Uint8Array | undefined;
  #listeners: ((policy: { sha256: string; wasm: Uint8Array }) => void)[] = [];
  #queue: Promise<void> = Promise.resolve();

  constructor(options: PolicyCheckerOptions) {
    this.#o = options;
    this.#log = (options.logger ?? log).with({ component: "policy" });
    this.#validate = options.validate ?? defaultValidator();
    this.#validations = validationsCounter(options.registry ?? processRegistry);
  }

  /** SHA-256 of the active (last accepted) module, if any. */
  active(): string | undefined {
    return this.#active;
  }

  /** The active module (SHA-256 and bytes), if any: what the model in Redis carries to agents. */
  activeModule(): { sha256: string; wasm: Uint8Array } | undefined {
    return this.#active && this.#activeWasm
      ? { sha256: this.#active, wasm: this.#activeWasm }
      : undefined;
  }

  /** Calls `fn` with each newly accepted module (the model publisher publishes it). */
  onAccepted(fn: (policy: { sha256: string; wasm: Uint8Array }) => void): void {
    this.#listeners.push(fn);
  }

  /** Checks the ConfigMap (the `policy` resource's objects); resolves when validated. */
  check(configMaps: readonly KubeObject[]): Promise<void> {
    this.#queue = this.#queue.then(() => this.#check(configMaps[0])).catch((err) =>
      this.#log.error("policy check failed", { error: String(err) })
    );
    return this.#queue;
  }

  async #check(cm: KubeObject | undefined): Promise<void> {
    const bytes = cm && moduleBytes(cm);
    if (!cm || !bytes) return;
    const sha = await sha256Hex(bytes);
    if (sha === this.#seen) return;
    this.#seen = sha;
    const target = {
      kind: "ConfigMap" as const,
      namespace: cm.metadata?.namespace,
      name: cm.metadata?.name ?? "",
      uid: cm.metadata?.uid,
    };
    let event: { type: "Normal" | "Warning"; reason: string; note: string };
    try {
      const digest = await this.#validate(bytes);
      this.#active = sha;
      this.#activeWasm = bytes;
      for (const fn of this.#listeners) fn({ sha256: sha, wasm: bytes });
      this.#validations.inc({ result: "accepted" });
      this.#log.info("policy module accepted", { sha256: sha, digest: digest.slice(0, 16) });
      event = {
        type: "Normal",
        reason: "PolicyValidated",
        note: `Policy module sha256 ${sha.slice(0, 16)} passed validation`,
      };
    } catch (err) {
      if (!(err instanceof PolicyRejectedError)) throw err;
      this.#validations.inc({ result: "rejected" });
      const kept = this.#active ? `sha256 ${this.#active.slice(0, 16)}` : "none";
      this.#log.warn("policy module rejected", { sha256: sha, reason: err.reason, kept });
      event = {
        type: "Warning",
        reason: "PolicyRejected",
        note:
          `Policy module sha256 ${sha.slice(0, 16)} rejected (${err.reason}): ${err.message}. ` +
          `The active module stays (${kept})`,
      };
    }
    if (!(this.#o.isLeader?.() ?? true)) return;
    await this.#o.writer.emitEvent({ regarding: target, action: "Validate", ...event });
  }
}
