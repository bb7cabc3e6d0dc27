import { randomNonce, randomPKCECodeVerifier, randomState } from 'openid-client';

/**
 * Sign-ins under way: between berth sending a browser to the provider and the provider sending it
 * back. Each is one use (taken at the callback), ends after FLOW_SECONDS, and at most MAX_FLOWS
 * wait (a new one drops the oldest): starting sign-ins costs an attacker a map entry, never more.
 */
export const FLOW_SECONDS = 600;
export const MAX_FLOWS = 500;

export type SignInFor = 'console' | 'chat';

export interface Flow {
  state: string;
  verifier: string;
  nonce: string;
  to: SignInFor;
  /** The chat's project the person asked for (else their first allowed one). */
  project?: string;
  redirectUri: string;
  at: number;
}

export function createFlows(now: () => number = Date.now) {
  // Keyed by state: a Map, never an object's properties; insertion order is age order.
  const waiting = new Map<string, Flow>();
  const sweep = () => {
    for (const [state, flow] of waiting) {
      if (flow.at + FLOW_SECONDS * 1000 > now() && waiting.size < MAX_FLOWS) break;
      waiting.delete(state);
    }
  };
  return {
    start(to: SignInFor, redirectUri: string, project?: string): Flow {
      sweep();
      const flow: Flow = {
        state: randomState(),
        verifier: randomPKCECodeVerifier(),
        nonce: randomNonce(),
        to,
        redirectUri,
        at: now(),
        ...(project === undefined ? {} : { project }),
      };
      waiting.set(flow.state, flow);
      return flow;
    },
    /** The flow a callback names, once; undefined when unknown, used or too old. */
    take(state: string): Flow | undefined {
      const flow = waiting.get(state);
      waiting.delete(state);
      return flow && flow.at + FLOW_SECONDS * 1000 > now() ? flow : undefined;
    },
    size: () => waiting.size,
  };
}

export type Flows = ReturnType<typeof createFlows>;
