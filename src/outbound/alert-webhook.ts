import { createHmac } from 'node:crypto';
import type { Logger } from 'pino';
import type { AlertsSettings } from '../config/alerts.js';

/** What an alert says: what happened, where, and to whom; never a credential, a message or a file. */
export interface Alert {
  type: 'honeytoken.hit';
  project: string;
  tenant: string;
  where: string;
  run?: string;
  at: string;
}

export const ALERT_BOUNDS = {
  /** Tries per alert (the first and two retries), with these waits before each retry. */
  attempts: 3,
  retryMs: [1_000, 5_000],
  /** One try's whole time (connect, send, answer). */
  timeoutMs: 5_000,
  /** Alerts waiting or in flight at once; one past that is dropped and logged (a flood must not grow berth's memory). */
  queued: 100,
} as const;

/** The signature a receiver checks: sha256= and the hex HMAC-SHA256 of "<timestamp>.<body>" under the webhook's secret. */
export function alertSignature(secret: string, timestamp: string, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
}

/**
 * berth.yaml alerts.webhook: each alert POSTed as JSON, signed, tried ALERT_BOUNDS.attempts times
 * (a 2xx ends it; a 4xx other than 408/429 is not retried). `send` returns at once: the caller
 * (a run's proxy, the model gateway, the API) never waits for the receiver. Read from the config
 * at each alert, so an edit of berth.yaml holds for the next one.
 */
export function createAlertWebhook(deps: {
  settings: () => AlertsSettings;
  logger: Logger;
  fetch?: typeof fetch;
  sleep?: (ms: number) => Promise<void>;
}) {
  const doFetch = deps.fetch ?? fetch;
  const sleep = deps.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref()));
  let inFlight = 0;
  const idle = new Set<() => void>();

  async function deliver(url: string, secret: string, alert: Alert): Promise<void> {
    const body = JSON.stringify(alert);
    for (let attempt = 1; attempt <= ALERT_BOUNDS.attempts; attempt++) {
      const timestamp = String(Math.floor(Date.now() / 1000));
      let why: string;
      try {
        const res = await doFetch(url, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'user-agent': 'berth-alerts',
            'x-berth-timestamp': timestamp,
            'x-berth-signature': alertSignature(secret, timestamp, body),
          },
          body,
          redirect: 'manual',
          signal: AbortSignal.timeout(ALERT_BOUNDS.timeoutMs),
        });
        await res.body?.cancel().catch(() => undefined);
        if (res.ok) return;
        why = `HTTP ${res.status}`;
        if (res.status < 500 && res.status !== 408 && res.status !== 429) break;
      } catch (err) {
        why = String((err as Error).message ?? err).slice(0, 200);
      }
      const wait = ALERT_BOUNDS.retryMs[attempt - 1];
      if (attempt === ALERT_BOUNDS.attempts || wait === undefined) {
        deps.logger.error({ type: alert.type, project: alert.project, why, attempts: attempt }, 'the alert webhook did not take an alert');
        return;
      }
      await sleep(wait);
    }
    deps.logger.error({ type: alert.type, project: alert.project }, 'the alert webhook refused an alert (not retried)');
  }

  return {
    /** Queue an alert (nothing when berth.yaml names no webhook); never throws, never waits. */
    send(alert: Alert): void {
      const hook = deps.settings().webhook;
      if (!hook) return;
      if (inFlight >= ALERT_BOUNDS.queued) {
        deps.logger.error({ type: alert.type, project: alert.project }, 'too many alerts waiting for the webhook: this one is dropped');
        return;
      }
      inFlight++;
      void deliver(hook.url, hook.secret, alert).finally(() => {
        inFlight--;
        if (inFlight === 0) for (const f of idle) f();
      });
    },
    /** Tests and shutdown: resolves when no alert is waiting or in flight. */
    settled: (): Promise<void> =>
      inFlight === 0
        ? Promise.resolve()
        : new Promise((resolve) => {
            const done = () => {
              idle.delete(done);
              resolve();
            };
            idle.add(done);
          }),
  };
}

export type AlertWebhook = ReturnType<typeof createAlertWebhook>;
