// Tether's one script of its own. Every page works without it; it only adds conveniences.
// (No inline script anywhere: the Content-Security-Policy allows scripts from our origin only.)
(() => {
  "use strict";

  // Lets the stylesheet show controls that need JavaScript (the copy button).
  document.documentElement.classList.add("js");

  // Copy buttons: <button data-copy-target="#id"> copies that field's value.
  document.addEventListener("click", async (event) => {
    const button = event.target instanceof Element ? event.target.closest("[data-copy-target]") : null;
    if (!button) return;
    const field = document.querySelector(button.getAttribute("data-copy-target"));
    if (!field) return;
    field.focus();
    field.select();
    let copied = false;
    try {
      await navigator.clipboard.writeText(field.value);
      copied = true;
    } catch {
      // No clipboard API (plain http on another host): the selected text can still be copied by hand.
      copied = document.execCommand && document.execCommand("copy");
    }
    button.dataset.label ??= button.textContent;
    button.textContent = copied ? "Copied" : "Press Ctrl+C";
    clearTimeout(button.resetTimer);
    button.resetTimer = setTimeout(() => (button.textContent = button.dataset.label), 2500);
  });

  // A read-only secret field (or command block) selects itself when focused, ready to copy.
  document.addEventListener("focusin", (event) => {
    const target = event.target;
    if ((target instanceof HTMLInputElement || target instanceof HTMLTextAreaElement) && target.hasAttribute("data-select-on-focus")) target.select();
  });

  // htmx swaps every HTTP answer, errors included (the server renders them). What it cannot swap is
  // no answer at all: a network failure or a timeout. Say so instead of doing nothing.
  const connectionAlert = () => document.getElementById("connection-alert");
  document.addEventListener("htmx:error", () => {
    const alert = connectionAlert();
    if (!alert) return;
    alert.textContent = "Tether could not be reached. Check your connection and try again.";
    alert.hidden = false;
  });
  document.addEventListener("htmx:before:request", () => {
    const alert = connectionAlert();
    if (alert) alert.hidden = true;
  });
})();
