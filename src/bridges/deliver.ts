import type { Logger } from 'pino';
import { partsSentOf, textFile } from '../channels/contract.js';
import type { Metrics } from '../base/metrics.js';
import type { ReplyParts } from '../store/chat-transcripts.js';
import type { DeliveryStep, Inbox } from '../store/inbox.js';
import type { ChatTransport } from './chat-transport.js';
import { DELIVERY_BOUNDS, nextDelivery, sendFailureOf, type DeliveryAt, type DeliveryBounds } from './delivery-policy.js';
import { undeliveredNotice } from './reply-words.js';

/**
 * The bridge core's deliver step: an answer (or a failure's notice) sent the ways
 * delivery-policy.ts says, each journaled in the inbox before it is tried. Its waits and clock
 * are injectable (tests record the waits instead of sleeping).
 */
export interface DeliverDeps {
  transport: ChatTransport;
  inbox: Inbox;
  log: Logger;
  metrics?: Pick<Metrics, 'replyUndelivered'>;
  sleep?: (ms: number) => Promise<void>;
  now?: () => number;
  bounds?: DeliveryBounds;
}

export type Deliver = (
  id: string,
  chat: string,
  reply: string,
  failure?: string,
  parts?: ReplyParts,
  from?: DeliveryStep,
  sentFrom?: number,
) => Promise<void>;

export function createDeliver(deps: DeliverDeps): Deliver {
  const { transport, inbox, log } = deps;
  const sleep = deps.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const now = deps.now ?? Date.now;
  const bounds = deps.bounds ?? DELIVERY_BOUNDS;
  const can = { plain: transport.sendPlain !== undefined, file: transport.sendFile !== undefined };

  /** One way of sending (delivery-policy.ts): the reply as the channel sends it, without markup, as a file, or the short notice that none went. */
  async function sendBy(
    step: DeliveryStep,
    id: string,
    chat: string,
    reply: string,
    parts: ReplyParts | undefined,
    refused: boolean,
    sent: number,
  ): Promise<string> {
    const about = { answerTo: id };
    // A reply of several parts goes on at its first part not delivered: the person never sees one twice.
    const from = sent > 0 ? { fromPart: sent } : {};
    if (step === 'send') await transport.send(chat, reply, { ...parts, ...about, ...from });
    else if (step === 'plain' && transport.sendPlain) await transport.sendPlain(chat, reply, { ...about, ...from });
    else if (step === 'file' && transport.sendFile) {
      const caption =
        sent > 0
          ? `the whole answer, as a file: its parts from part ${sent + 1} on could not be sent as messages`
          : 'the answer, as a file: it could not be sent as a message';
      await transport.sendFile(chat, textFile('reply.txt', reply), caption, about);
    } else {
      const notice = undeliveredNotice(id, refused);
      await (transport.sendPlain ? transport.sendPlain(chat, notice) : transport.send(chat, notice));
      return notice;
    }
    return reply;
  }

  /**
   * Send what was journaled as the answer. `failure`: it is the notice of a failure, and the
   * message ends failed with that reason once the sender has been told — so a berth killed in
   * between tells them after its restart, instead of ending the message in silence. A send that
   * fails is tried again the ways delivery-policy.ts says, each journaled before it is tried
   * (`from`: where a restart goes on), so a crash never goes back to a way that already failed;
   * a reply of several parts journals how many went through (`sentFrom`: where a restart goes on),
   * so no try sends a delivered part again;
   * if none goes through, the person is told in a short notice, and the operator by the journal,
   * an error log line and berth_undelivered_replies_total.
   */
  async function deliver(
    id: string,
    chat: string,
    reply: string,
    failure?: string,
    parts?: ReplyParts,
    from: DeliveryStep = 'send',
    sentFrom = 0,
  ) {
    const began = now();
    let at: DeliveryAt = { step: from, attempt: 1 };
    let sent = sentFrom;
    const errors: string[] = [];
    let refused = false;
    for (;;) {
      try {
        const said = await sendBy(at.step, id, chat, reply, parts, refused, sent);
        transport.answered?.(id, chat, said);
        if (at.step === 'notice') break;
        const how =
          at.step === 'send' ? undefined : `sent ${at.step === 'plain' ? 'without markup' : 'as a file'} after: ${errors.join('; ')}`;
        const reason = [failure, how].filter(Boolean).join('; ') || undefined;
        inbox.mark(id, failure === undefined ? 'replied' : 'failed', { reason });
        return;
      } catch (err) {
        const failed = sendFailureOf(err);
        const through = at.step === 'send' || at.step === 'plain' ? partsSentOf(err) : 0;
        const advanced = through > sent;
        if (advanced) sent = through;
        if (at.step !== 'notice') refused ||= failed.kind === 'refused';
        const status = (err as { status?: unknown })?.status;
        errors.push(
          `${at.step}: ${typeof status === 'number' && status > 0 ? `HTTP ${status} ` : ''}${String((err as Error)?.message ?? err).slice(0, 200)}`,
        );
        const next = nextDelivery(at, failed, can, now() - began, bounds);
        log.warn({ id, step: at.step, attempt: at.attempt, err: errors.at(-1), next: next.step }, 'a reply could not be sent this way');
        if (next.step === 'give-up') {
          if (advanced) inbox.mark(id, 'answered', { sent });
          break;
        }
        if (next.step !== at.step || advanced) inbox.mark(id, 'answered', { delivery: next.step, ...(advanced ? { sent } : {}) });
        if (next.afterMs > 0) await sleep(next.afterMs);
        at = next;
      }
    }
    // Not delivered: the journal, the log and the metric say so, whether the notice went or not.
    const reason = `${failure ? `${failure}; ` : ''}the reply could not be delivered (${errors.join('; ')})`;
    log.error({ id, tried: errors.length, told: errors.at(-1)?.startsWith('notice') !== true }, 'a reply could not be delivered');
    deps.metrics?.replyUndelivered(transport.name);
    inbox.mark(id, 'failed', { reason });
  }

  return deliver;
}
