import { $, $input } from './state.js';

/**
 * The page's own question box (a <dialog>), instead of the browser's prompt() and confirm():
 * styled like the page, and answerable by keyboard (Enter: the main button, Escape: cancel).
 * Resolves to the text typed (a confirmation: ''), or null when cancelled.
 */
export function ask(question: { text: string; ok: string; value?: string; danger?: boolean }): Promise<string | null> {
  const dialog = $('ask') as HTMLDialogElement;
  const input = $input('ask-input');
  const ok = $('ask-ok') as HTMLButtonElement;
  $('ask-text').textContent = question.text;
  ok.textContent = question.ok;
  ok.classList.toggle('danger', question.danger === true);
  input.hidden = question.value === undefined;
  input.value = question.value ?? '';
  return new Promise((resolve) => {
    const done = (answer: string | null) => {
      dialog.onclose = null;
      if (dialog.open) dialog.close();
      resolve(answer);
    };
    ok.onclick = () => done(question.value === undefined ? '' : input.value);
    $('ask-cancel').onclick = () => done(null);
    input.onkeydown = (ev) => {
      if (ev.key === 'Enter') ok.click();
    };
    dialog.onclose = () => done(null);
    dialog.showModal();
    (question.value === undefined ? ok : input).focus();
  });
}
