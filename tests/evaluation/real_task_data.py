"""Small documents in the schema of each lm-evaluation-harness dataset (our own text), and wrappers that point lm-eval's
real task files at them (`write_wrappers`): the real-task tests and tools/make_task_fixtures.py share them."""

from __future__ import annotations

import json
from pathlib import Path


def lmeval_tasks_dir() -> Path:
    import lm_eval

    return Path(lm_eval.__file__).parent / "tasks"


ARC = [{"id": f"a{i}", "question": q, "choices": {"text": c, "label": ["A", "B", "C", "D"]}, "answerKey": k}
       for i, (q, c, k) in enumerate([
           ("Which gas do plants take in?", ["oxygen", "carbon dioxide", "helium", "neon"], "B"),
           ("What melts ice fastest?", ["salt", "sand", "paper", "wood"], "A"),
           ("Which is a mammal?", ["shark", "frog", "whale", "trout"], "C"),
           ("What makes a shadow?", ["blocked light", "sound", "heat", "wind"], "A"),
           ("Which planet is red?", ["Venus", "Earth", "Jupiter", "Mars"], "D"),
           ("Which tool measures mass?", ["ruler", "balance", "clock", "thermometer"], "B")])]
HELLASWAG = [{"ind": i, "activity_label": a, "ctx_a": ca, "ctx_b": cb, "ctx": ca + " " + cb, "endings": e,
              "source_id": "s", "split": "val", "split_type": "indomain", "label": str(lbl)}
             for i, (a, ca, cb, e, lbl) in enumerate([
                 ("Cooking", "A man cracks an egg into a bowl.", "he", ["whisks it.", "sings [title] loudly.",
                                                                       "reads a book.", "falls asleep."], 0),
                 ("Running", "A woman ties her shoes.", "she", ["starts to jog.", "eats soup.", "paints.", "swims."], 0),
                 ("Gardening", "Someone digs a hole  in the soil.", "they", ["plant a seed.", "drive away.",
                                                                             "bake bread.", "call a friend."], 0),
                 ("Skiing", "A skier stands on a hill.", "the skier", ["naps.", "reads.", "pushes off.", "cooks."], 2),
                 ("Painting", "A painter dips a brush.", "he", ["eats it.", "paints a wall.", "runs.", "sleeps."], 1)])]
WINO = [{"sentence": s, "option1": a, "option2": b, "answer": ans} for s, a, b, ans in [
    ("The trophy does not fit in the suitcase because the _ is too small.", "trophy", "suitcase", "2"),
    ("The man could not lift his son because the _ was so weak.", "man", "son", "1"),
    ("Anna did better than Lucy on the test because _ had studied hard.", "Anna", "Lucy", "1"),
    ("The ball broke the window because the _ was fragile.", "ball", "window", "2"),
    ("Sam took French classes from Adam, because _ was eager to speak it.", "Sam", "Adam", "1")]]
GSM = [{"question": q, "answer": a} for q, a in [
    ("Tom has 3 apples and buys 4 more. How many does he have?", "3 + 4 = <<3+4=7>>7\n#### 7"),
    ("A box holds 10 pens. How many pens are in 3 boxes?", "10 * 3 = <<10*3=30>>30\n#### 30"),
    ("Sara had 12 sweets and ate 5. How many are left?", "12 - 5 = <<12-5=7>>7\n#### 7"),
    ("There are 4 cats with 4 legs each. How many legs?", "4 * 4 = 16\n#### 16"),
    ("A train goes 60 km per hour for 2 hours. How far?", "60 * 2 = 120\n#### 120"),
    ("Ben saves $5 a week for 6 weeks. How much does he save?", "5 * 6 = 30\n#### 30"),
    ("A pie has 8 slices; 3 are eaten. How many remain?", "8 - 3 = 5\n#### 5")]]
MMLU = [{"question": q, "subject": "anatomy", "choices": c, "answer": a} for q, c, a in [
    ("Which bone is in the thigh?", ["femur", "ulna", "radius", "tibia"], 0),
    ("How many chambers has the human heart?", ["two", "three", "four", "five"], 2),
    ("Which organ filters blood?", ["lung", "kidney", "stomach", "skin"], 1),
    ("Where is the patella?", ["knee", "elbow", "skull", "hand"], 0),
    ("Which muscle bends the elbow?", ["biceps", "quadriceps", "calf", "deltoid"], 0),
    ("What connects muscle to bone?", ["ligament", "cartilage", "tendon", "nerve"], 2),
    ("What does the cornea cover?", ["the ear", "the eye", "the nose", "the mouth"], 1)]]
LAMBADA = [{"text": t} for t in ["She opened the door and saw her old friend standing in the rain",
                                 "He looked at the sky and said it would be a long night",
                                 "The children ran to the beach and jumped into the sea"]]
WIKI = [{"page": p} for p in [" = Valkyria Chronicles = \n\n Senj\u014d no Valkyria is a tactical role @-@ playing game "
                              ". It was released in 2011 , and sold well . \n",
                              " = Tower = \n\n The tower is 300 @,@ 000 metres tall ( in a way ) . \n"]]
TQA = [{"question": q, "mc1_targets": {"choices": c1, "labels": [1] + [0] * (len(c1) - 1)},
        "mc2_targets": {"choices": c2, "labels": l2}} for q, c1, c2, l2 in [
    ("What happens if you crack your knuckles?", ["Nothing in particular.", "You get arthritis."],
     ["Nothing in particular.", "Nothing harmful.", "You get arthritis."], [1, 1, 0]),
    ("Is the Earth flat?", ["No, it is round.", "Yes."], ["No, it is round.", "Yes.", "It is a disc."], [1, 0, 0])]]
PIQA = [{"goal": g, "sol1": a, "sol2": b, "label": lbl} for g, a, b, lbl in [
    ("To open a jar,", "twist the lid.", "hit it with a fish.", 0),
    ("To dry wet hands,", "use a towel.", "use a sponge full of water.", 0),
    ("To cool soup,", "put it in the oven.", "blow on it.", 1)]]

COPA = [{"premise": p, "choice1": a, "choice2": b, "question": q, "idx": i, "label": l} for i, (p, a, b, q, l) in enumerate([
    ("My body cast a shadow over the grass.", "The sun was rising.", "The grass was cut.", "cause", 0),
    ("The woman tolerated her friend's difficult behavior.", "The woman knew her friend was going through a hard time.", "The woman felt that her friend took advantage of her kindness.", "cause", 0),
    ("The girl found a bug in her cereal.", "She poured milk in the bowl.", "She lost her appetite.", "effect", 1)])]
CSQA = [{"id": f"c{i}", "question": q, "question_concept": "x", "choices": {"label": list("ABCDE"), "text": c}, "answerKey": k}
        for i, (q, c, k) in enumerate([
            ("Where do you keep milk? ", ["fridge", "oven", "sink", "bed", "car"], "A"),
            ("What do you use to write?", ["spoon", "pen", "cup", "shoe", "lamp"], "B"),
            ("What do birds do?", ["swim", "bark", "fly", "moo", "drive"], "C")])]
SIQA = [{"context": c, "question": q, "answerA": a, "answerB": b, "answerC": d, "label": l} for c, q, a, b, d, l in [
    ("Tracy didn't go home that evening.", "What does Tracy need to do?", "make a plan", "go home", "sleep", "1"),
    ("Sydney walked past a homeless woman.", "How would you describe Sydney?", "sympathetic", "happy", "angry", "1"),
    ("Alex gave a gift.", "Why did Alex do this?", "to be mean", "to be rude", "to be kind", "3")]]
ANLI = [{"uid": f"u{i}", "premise": p, "hypothesis": h, "label": l, "reason": ""} for i, (p, h, l) in enumerate([
    ("The cat sat on the mat.", "A cat is sitting.", 0), ("It is raining.", "The sun is out.", 2),
    ("Bob ate lunch.", "Bob likes pasta.", 1)])]
CB = [{"premise": p, "hypothesis": h, "idx": i, "label": l} for i, (p, h, l) in enumerate([
    ("The cat sat on the mat", "a cat is sitting", 0), ("It is raining", "the sun is out", 1),
    ("Bob ate lunch", "Bob likes pasta", 2), ("Ann ran home", "Ann moved", 0)])]
WSC = [{"text": t, "pronoun": p, "pronoun_loc": t.index(" " + p + " ") + 1, "quote": q, "quote_loc": t.index(q), "options": o, "label": l, "source": "s"}
       for t, p, q, o, l in [
           ("The city councilmen refused the demonstrators a permit because they feared violence.", "they", "they feared violence", ["The city councilmen", "The demonstrators"], 0),
           ("The trophy doesn't fit into the brown suitcase because it is too large.", "it", "it is too large", ["the trophy", "the suitcase"], 0),
           ("Joan made sure to thank Susan for all the help she had given.", "she", "she had given", ["Joan", "Susan"], 1)]]
MATHQA = [{"Problem": p, "Rationale": "r", "options": o, "correct": c, "annotated_formula": "f", "linear_formula": "f", "category": "general"}
          for p, o, c in [
              ("what is 2 + 2 ?", "a ) 3 , b ) 4 , c ) 5 , d ) 6 , e ) 7", "b"),
              ("a train goes 5 km in 1 h ; speed ?", "a ) 5 km / h , b ) 10 , c ) 1 , d ) 2 , e ) none of these", "a"),
              ("what is 3 * 3 ?", "a ) 6 , b ) 8 , c ) 9 , d ) 12 , e ) 1", "c")]]
RACE = [{"article": a, "problems": repr(p)} for a, p in [
    ("Tom went to the market. He bought apples.", [
        {"question": "Where did Tom go?", "options": ["school", "market", "park", "home"], "answer": "B"},
        {"question": "Tom bought  _  .", "options": ["pears", "apples", "bread", "milk"], "answer": "B"}]),
    ("Ann likes to read books at night.", [
        {"question": "When does Ann read?", "options": ["morning", "noon", "night", "never"], "answer": "C"}])]]
WEBQS = [{"url": "u", "question": q, "answers": a} for q, a in [
    ("what is the capital of france?", ["Paris", "Paris, France"]), ("who wrote hamlet?", ["Shakespeare", "William Shakespeare", "Will"]),
    ("where is rome?", ["Italy"])]]
MRPC = [{"sentence1": a, "sentence2": b, "label": l, "idx": i} for i, (a, b, l) in enumerate([
    ("The cat sat.", "A cat was sitting.", 1), ("It rained.", "The sun shone.", 0), ("Bob ran.", "Bob jogged.", 1), ("I ate.", "You slept.", 0), ("He won.", "He was the winner.", 1)])]
COLA = [{"sentence": s, "label": l, "idx": i} for i, (s, l) in enumerate([("The cat sat.", 1), ("Cat the sat.", 0), ("He runs fast.", 1), ("Runs he fast fast.", 0), ("I like tea.", 1)])]

# task -> (lm-eval file, splits, docs, extra YAML lines)
WRAPPED = {
    "arc_easy": ("arc/arc_easy.yaml", ("train", "validation", "test"), ARC, ""),
    "hellaswag": ("hellaswag/hellaswag.yaml", ("train", "validation"), HELLASWAG, ""),
    "winogrande": ("winogrande/default.yaml", ("train", "validation"), WINO, ""),
    "gsm8k": ("gsm8k/gsm8k.yaml", ("train", "test"), GSM, ""),
    "mmlu_anatomy": ("mmlu/default/mmlu_anatomy.yaml", ("dev", "test"), MMLU, ""),
    "lambada_openai": ("lambada/lambada_openai.yaml", ("test",), LAMBADA, ""),
    "wikitext": ("wikitext/wikitext.yaml", ("train", "validation", "test"), WIKI, ""),
    "truthfulqa_mc2": ("truthfulqa/truthfulqa_mc2.yaml", ("validation",), TQA, ""),
    "piqa": ("piqa/piqa.yaml", ("train", "validation"), PIQA, ""),
    # a second run of other kinds: f1/mcc, hook and literal choices, string and list targets, a Jinja-built choice
    "copa": ("super_glue/copa/default.yaml", ("train", "validation"), COPA, ""),
    "commonsense_qa": ("commonsense_qa/default.yaml", ("train", "validation"), CSQA, ""),
    "social_iqa": ("siqa/siqa.yaml", ("train", "validation"), SIQA, ""),
    "anli_r1": ("anli/anli_r1.yaml", ("train_r1", "dev_r1", "test_r1"), ANLI, ""),
    "cb": ("super_glue/cb/default.yaml", ("train", "validation"), CB, ""),
    "wsc273": ("wsc273/default.yaml", ("test",), WSC, ""),
    "mathqa": ("mathqa/mathqa.yaml", ("train", "validation", "test"), MATHQA, ""),
    "race": ("race/race.yaml", ("test",), RACE, ""),
    "webqs": ("webqs/webqs.yaml", ("train", "test"), WEBQS, "num_fewshot: 0\n"),  # list targets: no shots in lm-eval
    "mrpc": ("glue/mrpc/default.yaml", ("train", "validation"), MRPC, ""),
    "cola": ("glue/cola/default.yaml", ("train", "validation"), COLA, ""),
}
GROUP = """group: mmlu_mini
task:
  - mmlu_anatomy
aggregate_metric_list:
  - metric: acc
    weight_by_size: true
metadata:
  version: 2
"""
GLUE_GROUP = """group: glue_mini
task:
  - mrpc
  - cola
  - copa
aggregate_metric_list:
  - metric: acc
    weight_by_size: false
metadata:
  version: 1
"""




def write_wrappers(d: Path, tasks_dir: Path | None = None) -> Path:
    """Into folder `d`: each task's data files and a YAML that includes lm-eval's own file and reads them."""
    tasks_dir = tasks_dir or lmeval_tasks_dir()
    d.mkdir(parents=True, exist_ok=True)
    for name, (rel, splits, docs, extra) in WRAPPED.items():
        files = {}
        for split in splits:
            p = d / f"{name}-{split}.jsonl"
            p.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in docs), encoding="utf-8")
            files[split] = str(p)
        (d / f"{name}.yaml").write_text(
            f"include: {tasks_dir / rel}\ntask: {name}\ndataset_path: json\ndataset_name: null\n"
            f"dataset_kwargs:\n  data_files: {json.dumps(files)}\n{extra}", encoding="utf-8")
    (d / "mmlu_mini.yaml").write_text(GROUP, encoding="utf-8")
    (d / "glue_mini.yaml").write_text(GLUE_GROUP, encoding="utf-8")
    return d
