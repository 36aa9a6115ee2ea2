"""Machine-translation evaluation: BLEU, chrF(++) and TER through sacrebleu (`nlpkit.mt.bleu`)."""
