// The new-sink form, enhanced (served as a file: the CSP allows no inline
// script). Without JavaScript every field shows, each saying which kind it
// is for, and Send test posts the form and answers with the page. With it:
// only the chosen kind's fields and connections show, the new connection's
// fields only when "New connection…" is chosen (or there is no connection
// yet), and Send test answers in place, marking the field a failure is
// about, so nothing typed (the token included) has to be typed again.
const form = document.getElementById("create-sink");
if (form) {
  const kind = form.querySelector("#sink-kind");
  const conn = form.querySelector("#sink-connection");
  const fresh = form.querySelector("#new-connection");
  const sync = () => {
    for (const el of form.querySelectorAll("[data-kind]")) {
      if (el.tagName === "OPTION") {
        el.hidden = el.disabled = el.dataset.kind !== kind.value;
      } else {
        el.hidden = el.dataset.kind !== kind.value;
      }
    }
    if (conn) {
      if (conn.selectedOptions.length && conn.selectedOptions[0].disabled) conn.value = "new";
      if (fresh) fresh.hidden = conn.value !== "new";
    }
  };
  kind.addEventListener("change", sync);
  if (conn) conn.addEventListener("change", sync);
  sync();

  // Marks of the last test: the input it blamed and the message under it.
  const unmark = () => {
    for (const p of form.querySelectorAll("p.field-error[data-test]")) p.remove();
    for (const el of form.querySelectorAll("[data-test-invalid]")) {
      el.removeAttribute("aria-invalid");
      el.removeAttribute("data-test-invalid");
      const ids = (el.getAttribute("aria-describedby") || "").split(" ").filter((id) => !id.startsWith("error-"));
      if (ids.length) el.setAttribute("aria-describedby", ids.join(" "));
      else el.removeAttribute("aria-describedby");
    }
  };
  const mark = (field, message) => {
    const input = form.querySelector(`[name="${CSS.escape(field)}"]:not([type="hidden"])`);
    if (!input || !message) return;
    const details = input.closest("details");
    if (details) details.open = true;
    for (const p of form.querySelectorAll(`#error-${CSS.escape(field)}`)) p.remove();
    const note = document.createElement("p");
    note.className = "field-error";
    note.id = "error-" + field;
    note.dataset.test = "1";
    note.textContent = message;
    // Under the input's label (and its help line, when there is one).
    let after = input.closest("label") || input;
    const help = after.nextElementSibling;
    if (help && help.classList.contains("help")) after = help;
    after.after(note);
    input.setAttribute("aria-invalid", "true");
    input.dataset.testInvalid = "1";
    const ids = (input.getAttribute("aria-describedby") || "").split(" ").filter((id) => id && id !== note.id);
    ids.push(note.id);
    input.setAttribute("aria-describedby", ids.join(" "));
  };

  const test = form.querySelector("#test-sink-button");
  const out = document.getElementById("test-result");
  if (test && out && window.fetch) {
    test.addEventListener("click", async (event) => {
      event.preventDefault();
      unmark();
      out.className = "";
      out.textContent = "Sending a test message…";
      try {
        const res = await fetch(test.formAction, {
          method: "POST",
          headers: { "Accept": "application/json" },
          body: new URLSearchParams(new FormData(form)),
        });
        const answer = await res.json();
        out.className = answer.ok ? "notice" : "error";
        out.textContent = answer.text;
        if (!answer.ok && answer.field) mark(answer.field, answer.message);
      } catch {
        out.className = "error";
        out.textContent = "The test could not be sent. Try again.";
      }
    });
  }
}
