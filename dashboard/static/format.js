// format.js — helpers shared by the dashboard scripts: the JSON API client and number/DOM
// formatting. The API is protobuf's JSON mapping with proto field names (snake_case, as in
// the .proto files and xmodctl -o json; common/proto_json.h), int64 values as strings (read
// them with Number()), enums by name, default-valued scalars present.
'use strict';

const Xmod = (() => {
  // Authentication: a coordinator with credentials wants a login. The page POSTs the token
  // once (login) and the server answers with an HttpOnly, SameSite=Strict session cookie that
  // the browser sends with every /api/ call; the token is never put in a URL or kept by the
  // page.

  // GET `path`; resolves to the parsed JSON, or null on 404 (the API's "none yet"). Other
  // failures reject with the server's {"error": ...} message when it sent one (with
  // `unauthenticated` set on a 401: the session is gone). With `missing`, a 404's message is
  // passed to it.
  async function api(path, missing) {
    const response = await fetch(path, {cache: 'no-store', credentials: 'same-origin'});
    const body = await response.json().catch(() => ({}));
    if (response.status === 404) {
      if (missing) missing(body.error || 'not found');
      return null;
    }
    if (!response.ok) {
      const error = new Error(body.error || `${path}: HTTP ${response.status}`);
      error.unauthenticated = response.status === 401;
      throw error;
    }
    return body;
  }

  // {authenticated, required, name, scope} of this browser's session.
  const session = () => api('/api/session');

  // Exchanges `token` for a session cookie; resolves to null, or to the server's refusal.
  async function login(token) {
    const response = await fetch('/api/login', {
      method: 'POST',
      body: token,
      headers: {'Content-Type': 'text/plain'},
      credentials: 'same-origin',
      cache: 'no-store',
    });
    if (response.ok) return null;
    const body = await response.json().catch(() => ({}));
    return body.error || `HTTP ${response.status}`;
  }

  const logout = () => fetch('/api/logout', {method: 'POST', credentials: 'same-origin'});

  // POST `path`, a change (cancel, retry, resume); resolves to the parsed JSON answer, rejects
  // with the server's {"error": ...} message (a 403 names the work's owner). The X-Xmod-Action
  // header is what the server asks of a change made with the session cookie: a page of another
  // site cannot send it.
  async function post(path) {
    const response = await fetch(path, {
      method: 'POST',
      headers: {'X-Xmod-Action': '1'},
      credentials: 'same-origin',
      cache: 'no-store',
    });
    const body = await response.json().catch(() => ({}));
    if (!response.ok) {
      const error = new Error(body.error || `${path}: HTTP ${response.status}`);
      error.unauthenticated = response.status === 401;
      throw error;
    }
    return body;
  }

  // 1234567 -> "1.23M"; parameter and token counts.
  function count(n) {
    n = Number(n);
    if (!n) return '';
    if (n >= 1e9) return (n / 1e9).toFixed(2) + 'B';
    if (n >= 1e6) return (n / 1e6).toFixed(2) + 'M';
    if (n >= 1e3) return (n / 1e3).toFixed(1) + 'K';
    return String(n);
  }

  // 50331648 -> "48.0 MiB" (binary units, as GPU memory is quoted); '' for none.
  function bytes(n) {
    n = Number(n);
    if (!n) return '';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let unit = 0;
    while (n >= 1024 && unit < units.length - 1) {
      n /= 1024;
      unit++;
    }
    return unit ? `${n.toFixed(1)} ${units[unit]}` : `${n} B`;
  }

  // FLOPs in scientific notation: 1.5e10.
  const flops = v => (Number(v) ? Number(v).toExponential(2).replace('e+', 'e') : '');
  const loss = v => (v === undefined || v === null || !isFinite(v) ? '' : Number(v).toFixed(4));
  const time = ms => (
      Number(ms) ?
          new Date(Number(ms)).toLocaleString(undefined, {dateStyle: 'short', timeStyle: 'short'}) :
          '');

  // Appends <td class=cls>text</td> to `row`; returns the cell.
  function cell(row, text, cls) {
    const td = document.createElement('td');
    if (cls) td.className = cls;
    td.textContent = text;
    row.appendChild(td);
    return td;
  }

  // document.createElement with a class and text.
  function node(tag, cls, text) {
    const n = document.createElement(tag);
    if (cls) n.className = cls;
    if (text !== undefined) n.textContent = text;
    return n;
  }

  return {api, post, session, login, logout, count, bytes, flops, loss, time, cell, node};
})();
