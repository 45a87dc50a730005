/**
 * Structured JSON logging: one line per decision, with a level and a timestamp.
 *
 * Every line is a JSON object `{"ts": "<ISO-8601>", "level": "info", "msg": "...", ...fields}`
 * written to stdout (the default sink). Fields never override `ts`, `level` or `msg`.
 * `Error` values in fields are written as their message.
 *
 * @example Log a decision
 * ```ts
 * import { log } from "./log.ts";
 * log.info("flow learned", { vip: "10.0.100.1", backend: "10.0.1.2" });
 * ```
 *
 * @example A logger that adds fields to every line
 * ```ts
 * import { log } from "./log.ts";
 * const flowLog = log.with({ component: "flows", node: "lb-a" });
 * flowLog.warn("redis unavailable", { queued: 12 });
 * ```
 *
 * @module
 */

/** Log levels, in increasing severity. */
export type LogLevel = "debug" | "info" | "warn" | "error";

/** Extra fields of a log line. */
export type LogFields = Record<string, unknown>;

/** A complete log record as handed to a sink. */
export interface LogRecord extends LogFields {
  ts: string;
  level: LogLevel;
  msg: string;
}

/** Where log records go. The default writes one JSON line to stdout. */
export type LogSink = (record: LogRecord) => void;

/** A structured logger. */
export interface Logger {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  /** A logger that adds `fields` to every line (its own fields win over the base's). */
  with(fields: LogFields): Logger;
  /** Whether lines of `level` are written now (to skip building costly fields). */
  enabled(level: LogLevel): boolean;
}

const SEVERITY: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

const stdoutSink: LogSink = (record) => console.log(JSON.stringify(record, replacer));

let minLevel: LogLevel = "info";
let sink: LogSink = stdoutSink;

function replacer(_key: string, value: unknown): unknown {
  if (value instanceof Error) return value.message;
  if (typeof value === "bigint") return value.toString();
  return value;
}

/** Sets the lowest level that is written (default `info`). Returns the previous level. */
export function setLogLevel(level: LogLevel): LogLevel {
  if (!(level in SEVERITY)) throw new RangeError(`Cannot set log level: unknown level "${level}"`);
  const previous = minLevel;
  minLevel = level;
  return previous;
}

/**
 * Replaces the sink (e.g. to capture lines in a test). Returns the previous sink so it can be
 * restored. Pass `undefined` to restore the stdout sink.
 */
export function setLogSink(next: LogSink | undefined): LogSink {
  const previous = sink;
  sink = next ?? stdoutSink;
  return previous;
}

/**
 * Captures log records until the returned handle is disposed; for tests.
 *
 * @example
 * ```ts
 * import { captureLogs, log } from "./log.ts";
 * using logs = captureLogs();
 * log.info("hello", { n: 1 });
 * if (logs.records[0]?.msg !== "hello") throw new Error("not captured");
 * ```
 */
export function captureLogs(): { records: LogRecord[] } & Disposable {
  const records: LogRecord[] = [];
  const previous = setLogSink((r) => records.push(r));
  const previousLevel = setLogLevel("debug");
  return {
    records,
    [Symbol.dispose]() {
      setLogSink(previous);
      setLogLevel(previousLevel);
    },
  };
}

function makeLogger(base: LogFields): Logger {
  const write = (level: LogLevel, msg: string, fields?: LogFields) => {
    if (SEVERITY[level] < SEVERITY[minLevel]) return;
    const ts = new Date().toISOString();
    // ts, level and msg come first in the line and cannot be overridden by fields.
    const record: LogRecord = { ts, level, msg, ...base, ...fields };
    record.ts = ts;
    record.level = level;
    record.msg = msg;
    sink(record);
  };
  return {
    debug: (msg, fields) => write("debug", msg, fields),
    info: (msg, fields) => write("info", msg, fields),
    warn: (msg, fields) => write("warn", msg, fields),
    error: (msg, fields) => write("error", msg, fields),
    with: (fields) => makeLogger({ ...base, ...fields }),
    enabled: (level) => SEVERITY[level] >= SEVERITY[minLevel],
  };
}

/** The process-wide logger. */
export const log: Logger = makeLogger({});
