/**
 * The narrow interface between the model's writer/readers and where the model lives: Redis
 * ({@linkcode RedisModelStore}) or memory (unit tests).
 *
 * @module
 */

import type { ModelPolicy } from "./schema.ts";

/** The whole model at one revision. */
export interface ModelSnapshot {
  /** The model's epoch; "" when there is no model (never written, or Redis lost it). */
  readonly epoch: string;
  /** Revision of the last change included. */
  readonly rev: number;
  /** Stream id of the last change included ("0-0": none): read changes after it. */
  readonly lastId: string;
  /** `namespace/name` → the entry's JSON as stored. */
  readonly entries: ReadonlyMap<string, string>;
  /** SHA-256 of the policy module in the model ("" or absent: none). */
  readonly policySha?: string;
  /** The model's settings JSON (`settings.ts`; "" or absent: none). */
  readonly settings?: string;
}

/** One change read from the stream. */
export interface ModelChange {
  /** Stream id. */
  readonly id: string;
  readonly rev: number;
  readonly epoch: string;
  /** `policy`: the policy module changed (`service` is ""; read it with `readPolicy`). */
  /** `settings`: the model's settings changed (`service` is ""; the JSON is `settings`). */
  readonly op: "upsert" | "delete" | "policy" | "settings";
  readonly service: string;
  /** The entry's JSON (upserts). */
  readonly entry?: string;
  /** SHA-256 of the new policy module (op `policy`). */
  readonly sha256?: string;
  /** The new settings JSON (op `settings`). */
  readonly settings?: string;
}

/** A write to the model: set or delete one service's entry. */
export type ModelWrite =
  | { readonly op: "upsert"; readonly service: string; readonly entry: string }
  | { readonly op: "delete"; readonly service: string };

/** Thrown by {@linkcode ModelStore.write} when the stored epoch is not the writer's. */
export class ModelEpochError extends Error {
  override name = "ModelEpochError";
}

/**
 * Where the model lives. Every method may throw `StoreUnavailableError` (lib/redis_connection.ts)
 * when the store cannot be reached.
 */
export interface ModelStore {
  /** The whole model, consistent with its revision and last stream id. */
  snapshot(): Promise<ModelSnapshot>;
  /** The current epoch ("" when there is no model). */
  epoch(): Promise<string>;
  /** Sets the epoch to `token` unless one exists; returns the epoch now stored. */
  initEpoch(token: string): Promise<string>;
  /**
   * Applies one write if the stored epoch is `epoch` (else throws {@linkcode ModelEpochError});
   * hash, revision and stream move together. Returns the new revision.
   */
  write(epoch: string, w: ModelWrite): Promise<number>;
  /**
   * Sets the policy module if the stored epoch is `epoch` (else {@linkcode ModelEpochError}) and
   * the stored module's SHA-256 is not `policy.sha256`; module, revision and stream (op
   * `policy`) move together. Returns the new revision, or 0 when nothing was written.
   */
  writePolicy(epoch: string, policy: ModelPolicy): Promise<number>;
  /**
   * Sets the model's settings JSON if the stored epoch is `epoch` (else
   * {@linkcode ModelEpochError}) and it differs from the stored one; settings, revision and
   * stream (op `settings`) move together. Returns the new revision, or 0 when nothing was written.
   */
  writeSettings(epoch: string, json: string): Promise<number>;
  /** The policy module in the model, or null when there is none. */
  readPolicy(): Promise<ModelPolicy | null>;
  /**
   * Changes after stream id `after` (`"$"`: after this call), at most `count`, waiting up to
   * `blockMs` for the first one (0: do not wait). Empty when none came.
   */
  read(after: string, options: { count: number; blockMs: number }): Promise<ModelChange[]>;
  /** Closes the connections. */
  close(): Promise<void>;
}
