// The console's one script. Pages work without it; it adds copy buttons
// and finishes a GitHub sign-in (the #login=<code> exchange). No inline
// script anywhere: the Content-Security-Policy forbids them.
"use strict";

document.addEventListener("click", function (ev) {
  var btn = ev.target.closest("[data-copy]");
  if (!btn) return;
  var input = document.getElementById(btn.getAttribute("data-copy"));
  if (!input) return;
  input.select();
  var done = function () { btn.textContent = "Copied"; };
  // Without the clipboard the handle stays selected, to copy by hand.
  var fallback = function () {
    input.focus();
    input.select();
    btn.textContent = document.execCommand("copy") ? "Copied" : "Press Ctrl+C";
  };
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(input.value).then(done, fallback);
  } else {
    fallback();
  }
});

// A file over the upload limit is refused before it is sent (the gateway
// refuses it too, as it reads).
document.addEventListener("change", function (ev) {
  var input = ev.target;
  var max = input.getAttribute && input.getAttribute("data-max-bytes");
  if (!max || !input.files || !input.files[0]) return;
  input.setCustomValidity(input.files[0].size > Number(max) ? "This file is larger than 20 MB, the most one upload may hold." : "");
  input.reportValidity();
});

// Confirm before a destructive form (revoke, disable, reject).
document.addEventListener("submit", function (ev) {
  var msg = ev.target.getAttribute("data-confirm");
  if (msg && !window.confirm(msg)) ev.preventDefault();
});

// GitHub sign-in ends at /console#login=<code>: trade the one-time code for
// a key with POST /v0/auth/exchange, then sign that key in through the
// ordinary form (the key travels in a POST body, never in a URL).
(function () {
  var m = /^#login=([A-Za-z0-9_-]+)$/.exec(location.hash);
  var failed = /^#login_error=([A-Za-z0-9_.-]+)$/.exec(location.hash);
  var status = document.getElementById("exchange-status");
  if (!m && !failed) return;
  history.replaceState(null, "", location.pathname + location.search);
  if (failed) {
    if (status) status.textContent = "GitHub sign-in failed: " + failed[1] + ".";
    return;
  }
  var form = document.getElementById("signin-key");
  if (!form) {
    location.assign("/console/signin#login=" + m[1]);
    return;
  }
  if (status) status.textContent = "Finishing the GitHub sign-in…";
  fetch("/v0/auth/exchange", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    credentials: "same-origin",
    body: JSON.stringify({ code: m[1] })
  }).then(function (res) {
    return res.json().then(function (body) { return { ok: res.ok, body: body }; });
  }).then(function (r) {
    var key = r.body && (r.body.human_key || r.body.key);
    if (!r.ok || !key) {
      var msg = r.body && r.body.error ? r.body.error.message : "the code was refused";
      if (status) status.textContent = "GitHub sign-in failed: " + msg;
      return;
    }
    form.elements.key.value = key;
    if (r.body.agent_key) form.elements.agent_key.value = r.body.agent_key;
    form.submit();
  }).catch(function () {
    if (status) status.textContent = "GitHub sign-in failed: the gateway did not answer.";
  });
})();
