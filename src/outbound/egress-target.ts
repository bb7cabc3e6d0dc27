import type { Duplex } from 'node:stream';
import zlib from 'node:zlib';

/** What the egress proxy knows of where a request goes, and of the headers it never passes on. */

/** Hop-by-hop headers (and Host, which berth sets from the target): never passed on. */
export const HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'host',
]);

/** Where a request read by the proxy goes: fixed by the CONNECT (or the absolute URL), never by its Host header. */
export interface Target {
  https: boolean;
  host: string;
  port: number;
  address: string;
  /** Off the allowlist and allowed by someone: a failure is told to the person. */
  asked: boolean;
}

export const TLS_VERIFY_ERRORS = /^(UNABLE_TO_|SELF_SIGNED|DEPTH_ZERO|CERT_|ERR_TLS_CERT|HOSTNAME_MISMATCH|ERR_SSL)/;
export const DECODERS: Record<string, () => Duplex> = {
  gzip: () => zlib.createGunzip(),
  'x-gzip': () => zlib.createGunzip(),
  deflate: () => zlib.createInflate(),
  br: () => zlib.createBrotliDecompress(),
};

export function defaultPort(t: Target): boolean {
  return t.port === (t.https ? 443 : 80);
}

export function splitHostPort(target: string): { host: string; port: number } {
  const m = /^\[([^\]]+)\]:(\d+)$/.exec(target) ?? /^([^:]+):(\d+)$/.exec(target);
  return m ? { host: (m[1] as string).toLowerCase(), port: Number(m[2]) } : { host: '', port: 0 };
}
