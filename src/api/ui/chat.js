// bankml's chat page: the conversation over POST /v1/chat/completions (stream: true), the model list from
// GET /v1/models, the pin from GET /bankml, and each answer's bankml_receipt checked here: the sha256 of the
// text received (crypto.subtle.digest over its UTF-8) against the receipt's response_sha256.
'use strict';
(function () {
  const $ = (id) => document.getElementById(id);
  const state = { messages: [], models: [], busy: null, pin: null };
  const NUMS = ['temperature', 'top_p', 'top_k', 'max_tokens', 'seed'];

  function headers(json) {
    const h = {};
    if (json) h['Content-Type'] = 'application/json';
    const key = $('apikey').value.trim();
    if (key) h['Authorization'] = 'Bearer ' + key;
    return h;
  }

  async function getJSON(path) {
    const r = await fetch(path, { headers: headers(false) });
    const body = await r.text();
    let j = null;
    try { j = JSON.parse(body); } catch (e) { /* not JSON */ }
    if (!r.ok) throw new Error(path + ': ' + r.status + ' ' + errText(j, body));
    return j;
  }

  function errText(j, body) {
    if (j && j.error) return typeof j.error === 'string' ? j.error : (j.error.message || JSON.stringify(j.error));
    return body.slice(0, 300);
  }

  function showErr(msg) {
    $('err').textContent = msg || '';
    if (msg && /401/.test(msg)) { $('settings').open = true; $('apikey').focus(); }
  }

  async function sha256hex(s) {
    const d = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(s));
    return Array.from(new Uint8Array(d), (b) => b.toString(16).padStart(2, '0')).join('');
  }

  function fmtTime(unix) {
    if (!unix) return '';
    return new Date(unix * 1000).toLocaleString();
  }

  async function loadPin() {
    try {
      const b = await getJSON('/bankml');
      state.pin = b;
      const v = b.verified || {};
      const el = $('pin');
      el.textContent = '';
      if (!b.model || !v.model_sha256) { el.textContent = 'no model verified yet (each is verified on first use)'; return; }
      const ok = document.createElement('b');
      ok.textContent = v.verdict === 'play' ? 'verified' : String(v.verdict);
      el.append('pinned ' + b.model + ' sha256 ' + v.model_sha256 + ' \u00b7 ', ok,
                ' ' + fmtTime(b.hashed_at) + (b.resident ? ' \u00b7 resident: ' + b.resident : ''));
    } catch (e) { $('pin').textContent = String(e.message || e); }
  }

  async function loadModels() {
    try {
      const m = await getJSON('/v1/models');
      state.models = (m.data || []).map((d) => ({ id: d.id, n_ctx: d.meta ? d.meta.n_ctx : null }));
      const sel = $('model');
      const keep = sel.value || localStorage.getItem('bankml.model') || '';
      sel.textContent = '';
      for (const d of state.models) {
        const o = document.createElement('option');
        o.value = d.id; o.textContent = d.id;
        sel.append(o);
      }
      if (state.models.some((d) => d.id === keep)) sel.value = keep;
    } catch (e) { showErr(String(e.message || e)); }
  }

  function bubble(role, text) {
    const div = document.createElement('div');
    div.className = 'msg ' + role;
    const r = document.createElement('div'); r.className = 'role'; r.textContent = role;
    const t = document.createElement('div'); t.className = 'text'; t.textContent = text;
    const meta = document.createElement('div'); meta.className = 'meta';
    div.append(r, t, meta);
    $('log').append(div);
    div.scrollIntoView({ block: 'end' });
    return { div, t, meta };
  }

  function render() {
    $('log').textContent = '';
    for (const m of state.messages) {
      const b = bubble(m.role, m.content);
      if (m.meta) b.meta.replaceChildren(...m.meta());
    }
  }

  function requestBody() {
    const msgs = [];
    const sys = $('system').value;
    if (sys.trim()) msgs.push({ role: 'system', content: sys });
    for (const m of state.messages) msgs.push({ role: m.role, content: m.content });
    const body = { model: $('model').value || undefined, messages: msgs, stream: true };
    for (const k of NUMS) {
      const v = $(k).value.trim();
      if (v !== '') body[k] = Number(v);
    }
    return body;
  }

  function setBusy(b) {
    state.busy = b;
    $('send').disabled = !!b;
    $('stop').disabled = !b;
    $('regen').disabled = !!b || !state.messages.some((m) => m.role === 'assistant');
  }

  // one streamed answer into a new assistant bubble
  async function complete() {
    showErr('');
    const body = requestBody();
    const ctl = new AbortController();
    setBusy(ctl);
    const b = bubble('assistant', '');
    b.div.classList.add('streaming');
    let text = '', receipt = null, timings = null, finish = null, stopped = false, failed = false;
    const t0 = performance.now();
    try {
      const r = await fetch('/v1/chat/completions', { method: 'POST', headers: headers(true), body: JSON.stringify(body), signal: ctl.signal });
      if (!r.ok) {
        const raw = await r.text();
        let j = null; try { j = JSON.parse(raw); } catch (e) { /* text */ }
        throw new Error(r.status + ' ' + errText(j, raw));
      }
      const rd = r.body.getReader();
      const dec = new TextDecoder();
      let buf = '';
      for (;;) {
        const { value, done } = await rd.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const ev = buf.slice(0, i); buf = buf.slice(i + 2);
          for (const line of ev.split('\n')) {
            const m = /^(data|error): ?(.*)$/.exec(line);
            if (!m || m[2] === '[DONE]') continue;
            const j = JSON.parse(m[2]);
            if (m[1] === 'error' || j.error) throw new Error(errText(j, m[2]));
            const c = j.choices && j.choices[0];
            if (c && c.delta && typeof c.delta.content === 'string') { text += c.delta.content; b.t.textContent = text; }
            if (c && c.finish_reason) finish = c.finish_reason;
            if (j.timings) timings = j.timings;
            if (j.bankml_receipt) receipt = j.bankml_receipt;
          }
        }
      }
    } catch (e) {
      if (e.name === 'AbortError') stopped = true;
      else { failed = true; showErr(String(e.message || e)); }
    }
    b.div.classList.remove('streaming');
    if (failed && !text) {   // nothing came: the error line says why, the conversation stays as it was
      b.div.remove();
      setBusy(null);
      return;
    }
    const ms = performance.now() - t0;
    const check = receipt ? await sha256hex(text) : null;
    const entry = { role: 'assistant', content: text };
    entry.meta = () => metaNodes(entry.info);
    entry.info = { receipt, timings, finish, stopped, ms, check, model: body.model };
    state.messages.push(entry);
    b.div.dataset.receipt = receipt ? (check === receipt.response_sha256 ? 'ok' : 'bad') : 'none';
    b.meta.replaceChildren(...metaNodes(entry.info));
    setBusy(null);
    loadPin();
    if (!state.models.some((d) => d.id === body.model && d.n_ctx)) loadModels();   // meta once it is resident
    $('input').focus();
  }

  function metaNodes(info) {
    const out = [];
    const t = info.timings;
    const parts = [];
    if (info.stopped) parts.push('stopped');
    else if (info.finish) parts.push('finish: ' + info.finish);
    if (t) {
      parts.push(t.predicted_n + ' tokens, ' + t.predicted_per_second.toFixed(1) + ' tokens/s');
      const used = (t.cache_n || 0) + t.prompt_n + t.predicted_n;
      const m = state.models.find((d) => d.id === info.model);
      parts.push('context ' + used + (m && m.n_ctx ? ' / ' + m.n_ctx : '') + ' (prompt ' + t.prompt_n + ', cached ' + (t.cache_n || 0) + ')');
    }
    out.push(parts.join(' \u00b7 '));
    const r = info.receipt;
    if (r) {
      const ok = info.check === r.response_sha256;
      const span = document.createElement('span');
      span.className = 'receipt ' + (ok ? 'ok' : 'bad');
      span.textContent = ok ? ' \u2713 receipt' : ' \u2717 receipt';
      span.title = ok ? 'the sha256 of the text received equals the receipt\'s response_sha256'
                      : 'the text received does not hash to the receipt\'s response_sha256';
      out.push(document.createElement('br'), span,
               ' response_sha256 ' + r.response_sha256 + (ok ? '' : ' \u2260 received ' + info.check) +
               ' \u00b7 model_sha256 ' + r.model_sha256);
    } else if (!info.stopped) {
      out.push(' \u00b7 no receipt');
    }
    return out;
  }

  function send() {
    if (state.busy) return;
    const text = $('input').value;
    if (!text.trim()) return;
    $('input').value = '';
    state.messages.push({ role: 'user', content: text });
    bubble('user', text);
    complete();
  }

  function regenerate() {
    if (state.busy) return;
    while (state.messages.length && state.messages[state.messages.length - 1].role === 'assistant') state.messages.pop();
    if (!state.messages.length) return;
    render();
    complete();
  }

  $('form').addEventListener('submit', (e) => { e.preventDefault(); send(); });
  $('input').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); send(); }
  });
  document.addEventListener('keydown', (e) => { if (e.key === 'Escape' && state.busy) state.busy.abort(); });
  $('stop').addEventListener('click', () => { if (state.busy) state.busy.abort(); });
  $('regen').addEventListener('click', regenerate);
  $('clear').addEventListener('click', () => { if (!state.busy) { state.messages = []; render(); setBusy(null); } });
  $('model').addEventListener('change', () => { localStorage.setItem('bankml.model', $('model').value); });
  $('apikey').addEventListener('change', () => { loadModels(); loadPin(); });
  for (const k of NUMS.concat(['system'])) {
    const saved = localStorage.getItem('bankml.' + k);
    if (saved !== null) $(k).value = saved;
    $(k).addEventListener('change', () => localStorage.setItem('bankml.' + k, $(k).value));
  }
  window.bankmlChat = state;   // for the browser test and the curious
  loadModels().then(loadPin);
  $('input').focus();
})();
