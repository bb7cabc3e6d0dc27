import { createHash, createHmac } from 'node:crypto';
import { BerthError } from '../base/errors.js';
import { sameSecret } from './secrets.js';

/**
 * How signed webhooks are signed (webhook.ts): berth's own scheme (X-Berth-Timestamp,
 * X-Berth-Signature v1=<hex>) and Standard Webhooks' (webhook-id, webhook-timestamp,
 * webhook-signature v1,<base64>); the headers of a request checked before its body is read,
 * and a callback's, in its hook's scheme.
 */
export type Signing = 'berth' | 'standard-webhooks';
const MIN_SECRET = 32;
/** What berth signs with: anything else in X-Berth-Signature is refused before the body is read. */
const SIGNATURE = /^v1=[0-9a-f]{64}$/;
/** Standard Webhooks: a secret is "whsec_" (optional, as its libraries take it) and base64 of a 24-64 byte key. */
const STANDARD_SECRET = /^(whsec_)?[A-Za-z0-9+/]+={0,2}$/;
const STANDARD_KEY_BYTES = { min: 24, max: 64 };
/** webhook-signature: at most this many signatures are looked at (a sender signs with one or two keys). */
const STANDARD_MAX_SIGNATURES = 8;
/** webhook-id: the message's id (printable, as a body's id). */
const STANDARD_ID = /^[^\u0000-\u001f\u007f]{1,200}$/;

/** What is wrong with a hook's secret for its signing scheme, if anything. */
export function secretProblem(signing: Signing, secret: string): string | undefined {
  if (signing === 'berth') return secret.length < MIN_SECRET ? `must be at least ${MIN_SECRET} characters` : undefined;
  if (!STANDARD_SECRET.test(secret)) return 'must be "whsec_" and base64 (a Standard Webhooks secret)';
  const bytes = standardKey(secret).length;
  return bytes < STANDARD_KEY_BYTES.min || bytes > STANDARD_KEY_BYTES.max
    ? `must hold a key of ${STANDARD_KEY_BYTES.min}-${STANDARD_KEY_BYTES.max} bytes (it holds ${bytes})`
    : undefined;
}

/** A Standard Webhooks secret's key: the bytes of the base64 after "whsec_". */
const standardKey = (secret: string) => Buffer.from(secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret, 'base64');

/** One Standard Webhooks signature: "v1," and the base64 HMAC-SHA256 of "<id>.<timestamp>.<body>" under the key. */
export function standardWebhookSignature(secret: string, id: string, timestamp: string, body: Buffer | string): string {
  return `v1,${createHmac('sha256', standardKey(secret)).update(`${id}.${timestamp}.`).update(body).digest('base64')}`;
}

/** The signature berth checks and sends: v1=HMAC-SHA256(secret, "<timestamp>.<body>"). */
export function webhookSignature(secret: string, timestamp: string, body: Buffer | string): string {
  return `v1=${createHmac('sha256', secret).update(`${timestamp}.`).update(body).digest('hex')}`;
}

/** A request's signature headers, checked before the body is read: whether the body matches, and the refusal if not. */
export interface SignedRequest {
  matches(secret: string, raw: Buffer): boolean;
  mismatch: BerthError;
  /** The message id the headers carry (Standard Webhooks' webhook-id). */
  id?: string;
}

/** A timestamp header: unix seconds, within the window of berth's clock (else a replay). */
function checkTimestamp(header: string, value: string, windowSeconds: number, hint: string): void {
  const ts = /^[0-9]{1,12}$/.test(value) ? Number(value) : NaN;
  if (!Number.isFinite(ts)) throw new BerthError('UNAUTHORIZED', `${header} must be the unix time in seconds`, { hint });
  if (Math.abs(Date.now() / 1000 - ts) > windowSeconds) {
    throw new BerthError('UNAUTHORIZED', `${header} is more than ${windowSeconds} s from berth's clock: refused as a replay`, {
      hint: "sign each request when it is sent; check the sender's clock",
    });
  }
}

/** berth's scheme: X-Berth-Timestamp and X-Berth-Signature v1=<hex>. */
export function berthHeaders(req: Request, windowSeconds: number): SignedRequest {
  const timestamp = req.headers.get('x-berth-timestamp') ?? '';
  checkTimestamp('X-Berth-Timestamp', timestamp, windowSeconds, 'see docs/webhooks.md');
  const signature = req.headers.get('x-berth-signature') ?? '';
  const signing = { hint: 'v1=<hex HMAC-SHA256 of "<timestamp>.<body>" under the hook\'s secret>; see docs/webhooks.md' };
  if (!SIGNATURE.test(signature)) throw new BerthError('UNAUTHORIZED', 'X-Berth-Signature is missing (or not v1=<64 hex digits>)', signing);
  return {
    matches: (secret, raw) => sameSecret(signature, webhookSignature(secret, timestamp, raw)),
    mismatch: new BerthError('UNAUTHORIZED', 'X-Berth-Signature does not match the body', signing),
  };
}

/** Standard Webhooks: webhook-id, webhook-timestamp, webhook-signature (space-separated "v1,<base64>"; one must match). */
export function standardHeaders(req: Request, windowSeconds: number): SignedRequest {
  const signing = {
    hint: 'Standard Webhooks: webhook-signature "v1,<base64 HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<body>">" under the whsec_ key; see docs/webhooks.md',
  };
  const id = req.headers.get('webhook-id') ?? '';
  if (!STANDARD_ID.test(id))
    throw new BerthError('UNAUTHORIZED', 'webhook-id is missing (or longer than 200 characters, or not printable)', signing);
  const timestamp = req.headers.get('webhook-timestamp') ?? '';
  checkTimestamp('webhook-timestamp', timestamp, windowSeconds, signing.hint);
  const given = (req.headers.get('webhook-signature') ?? '')
    .split(' ')
    .filter((s) => s.startsWith('v1,'))
    .slice(0, STANDARD_MAX_SIGNATURES);
  if (given.length === 0) throw new BerthError('UNAUTHORIZED', 'webhook-signature is missing (or holds no "v1,<base64>")', signing);
  return {
    id,
    matches(secret, raw) {
      const expected = standardWebhookSignature(secret, id, timestamp, raw);
      // Every one compared (no early exit): the time taken says nothing of which matched.
      return given.map((g) => sameSecret(g, expected)).includes(true);
    },
    mismatch: new BerthError('UNAUTHORIZED', 'webhook-signature does not match the body', signing),
  };
}

/** A callback's signature headers, in the hook's scheme (a Standard Webhooks id per answer, the same on a re-send). */
export function callbackSignature(
  hook: { signing: Signing },
  secret: string,
  messageId: string,
  timestamp: string,
  body: string,
): Record<string, string> {
  if (hook.signing === 'berth') return { 'x-berth-timestamp': timestamp, 'x-berth-signature': webhookSignature(secret, timestamp, body) };
  const id = `msg_${createHash('sha256').update(messageId).digest('base64url').slice(0, 32)}`;
  return { 'webhook-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': standardWebhookSignature(secret, id, timestamp, body) };
}
