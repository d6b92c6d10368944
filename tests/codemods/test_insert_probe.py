"""The probe codemod, before/after (libcst's CodemodTest), and its diff."""

from __future__ import annotations

from libcst.codemod import CodemodTest

from infrarsi.codemods.insert_probe import InsertProbeCommand, insert_probe, probe_diff


class TestInsertProbe(CodemodTest):
    TRANSFORM = InsertProbeCommand

    def test_simple_loop(self) -> None:
        before = """
            import torch

            for it in range(steps):
                x, y = get_batch()
                logits, loss = model(x, y)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
                if it > max_iters:
                    break
        """
        after = """
            import torch
            from infrarsi import probe

            for it in range(steps):
                x, y = get_batch()
                logits, loss = model(x, y)
                loss.backward()
                optimizer.step()
                probe.step(loss=loss.item(), tokens=x.numel())
                optimizer.zero_grad()
                if it > max_iters:
                    break
        """
        self.assertCodemod(before, after)

    def test_accumulation_sums_micro_batch_losses(self) -> None:
        before = """
            def train():
                while True:
                    for micro in range(accum):
                        X, Y = get_batch()
                        with ctx:
                            logits = model(X)
                            loss = criterion(logits, Y)
                            loss = loss / accum
                        scaler.scale(loss).backward()
                    scaler.step(optimizer)
                    scaler.update()
        """
        after = """
            from infrarsi import probe

            def train():
                while True:
                    probe_loss, probe_tokens = 0.0, 0
                    for micro in range(accum):
                        X, Y = get_batch()
                        with ctx:
                            logits = model(X)
                            loss = criterion(logits, Y)
                            loss = loss / accum
                        scaler.scale(loss).backward()
                        probe_loss += loss.item()
                        probe_tokens += X.numel()
                    scaler.step(optimizer)
                    probe.step(loss=probe_loss, tokens=probe_tokens)
                    scaler.update()
        """
        self.assertCodemod(before, after)

    def test_distributed_counts_every_rank(self) -> None:
        before = """
            for batch in loader:
                loss = net(batch).mean()
                loss.backward()
                opt.step()
        """
        after = """
            import os
            from infrarsi import probe

            for batch in loader:
                loss = net(batch).mean()
                loss.backward()
                opt.step()
                probe.step(loss=loss.item(), tokens=batch.numel() * int(os.environ.get("WORLD_SIZE", "1")))
        """
        self.assertCodemod(before, after, distributed=True)

    def test_skips_when_present_or_no_loop(self) -> None:
        present = "from infrarsi import probe\nfor x in d:\n    loss.backward()\n    opt.step()\n    probe.step(loss=1.0, tokens=1)\n"
        self.assertCodemod(present, present, expected_skip=True)
        no_step = "for x in d:\n    loss = model(x)\n    loss.backward()\n"
        self.assertCodemod(no_step, no_step, expected_skip=True)


def test_outcome_values_and_diff():
    edit = insert_probe("for x in d:\n    loss = model(x)\n    loss.backward()\n")
    assert (edit.status, edit.reason) == ("skipped", "no training loop: no for/while loop calls both .backward() and an optimizer step")
    source = "for x in d:\n    loss = model(x)\n    loss.backward()\n    optimizer.step()\n"
    edit, diff = probe_diff(source, "train.py")
    assert edit.status == "inserted"
    assert diff.startswith("--- a/train.py\n+++ b/train.py\n")
    assert "+    probe.step(loss=loss.item(), tokens=x.numel())\n" in diff
    assert "+from infrarsi import probe\n" in diff
