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

# a third sweep: more of lm-eval's popular files (our own documents in each dataset's schema)
BOOLQ = [{"question": q, "passage": p, "idx": i, "label": l} for i, (q, p, l) in enumerate([
    ("is the sun a star", "The Sun is the star at the centre of the Solar System.", 1),
    ("can penguins fly", "Penguins are flightless birds living mostly in the southern hemisphere.", 0),
    ("is water wet", "Water is a liquid at room temperature and wets most surfaces.", 1),
    ("is paris in spain", "Paris is the capital and largest city of France.", 0)])]
OBQA = [{"id": f"o{i}", "question_stem": q, "choices": {"text": c, "label": ["A", "B", "C", "D"]}, "answerKey": k}
        for i, (q, c, k) in enumerate([
            ("The sun is responsible for", ["puppies learning new tricks", "plants sprouting, blooming and wilting",
                                            "mail being delivered", "cars going fast"], "B"),
            ("When food is reduced in the stomach", ["the mind needs time", "nutrients are being deconstructed",
                                                      "reader's digest is a book", "the body is cold"], "B"),
            ("Poison causes harm to which of the following?", ["a Tree", "a robot", "a house", "a car"], "A"),
            ("A magnet will stick to", ["a belt buckle", "a wooden table", "a plastic cup", "a paper plate"], "A")])]
SCIQ = [{"question": q, "distractor3": d3, "distractor1": d1, "distractor2": d2, "correct_answer": a, "support": s}
        for q, d1, d2, d3, a, s in [
            ("What type of organism is commonly used in preparation of foods such as cheese and yogurt?",
             "viruses", "protozoa", "gymnosperms", "mesophilic organisms",
             " Mesophiles grow best in moderate temperature, typically between 25 and 40 degrees."),
            ("What phenomenon makes global winds blow northeast to southwest?", "tropical effect",
             "muon effect", "centrifugal effect", "coriolis effect", ""),
            ("Changes from a less-ordered state to a more-ordered state are", "endothermic", "unbalanced",
             "reactive", "exothermic", "Summary Changes of state are examples of phase changes.\n"),
            ("What is the least dangerous radioactive decay?", "zeta decay", "beta decay", "gamma decay",
             "alpha decay", "All radioactive decay is dangerous to living things, but alpha decay is the least.")]]
LAMBADA_STD = [{"text": t} for t in ["He stood at the door for a long moment and then knocked twice",
                                     "They sailed across the bay until they reached the island",
                                     "She handed him the key and told him to lock the gate"]]
LOGIQA = [{"label": l, "context": c, "question": q, "options": o} for l, c, q, o in [
    ("a", "Some cats are black. All black things absorb heat.", "Which must be true?",
     ["Some cats absorb heat.", "All cats are black.", "No cat absorbs heat.", "Heat is black."]),
    ("c ", "Every student passed the test. Ann is a student.", "What follows?",
     ["Ann failed.", "Ann skipped it.", "Ann passed.", "Nobody passed."]),
    ("b", "If it rains, the road is wet. The road is dry.", "What can be inferred?",
     ["It rains.", "It does not rain.", "The road is wet.", "Roads are dry."])]]
TRIVIAQA = [{"question": q, "question_id": f"tq{i}", "question_source": "http://www.quizballs.com/",
             "entity_pages": {"doc_source": [], "filename": [], "title": [], "wiki_context": []},
             "search_results": {"description": [], "filename": [], "rank": [], "title": [], "url": [],
                                "search_context": []},
             "answer": {"aliases": al, "normalized_aliases": [a.lower() for a in al], "matched_wiki_entity_name": "",
                        "normalized_matched_wiki_entity_name": "", "normalized_value": al[0].lower(),
                        "type": "WikipediaEntity", "value": al[0]}}
            for i, (q, al) in enumerate([
                ("Which planet is known as the Red Planet", ["Mars", "Planet Mars", "The Red Planet"]),
                ("Who wrote Romeo and Juliet", ["William Shakespeare", "Shakespeare", "The Bard"]),
                ("What is the capital city of Japan", ["Tokyo", "T\u014dky\u014d"]),
                ("How many legs does a spider have", ["8", "Eight"])])]
NQ = [{"question": q, "answer": a} for q, a in [
    ("who wrote the declaration of independence", ["Thomas Jefferson"]),
    ("when did the first world war start", ["1914", "28 July 1914"]),
    ("what is the largest ocean on earth", ["the Pacific Ocean", "Pacific"]),
    ("who painted the mona lisa", ["Leonardo da Vinci"])]]
BBH_BOOL = [{"input": i, "target": t} for i, t in [
    ("not ( True ) and ( True ) is", "False"), ("True and not not ( not False ) is", "True"),
    ("not True or ( False and True ) is", "False"), ("False or not ( True ) and False is", "False")]]
BBH_SNARKS = [{"input": i, "target": t} for i, t in [
    ("Which statement is sarcastic?\nOptions:\n(A) Yes, because having interests is a crime\n(B) Yes, because "
     "having interests is a right", "(A)"),
    ("Which statement is sarcastic?\nOptions:\n(A) Great, a flat tyre on my birthday\n(B) Bad, a flat tyre on "
     "my birthday", "(A)"),
    ("Which statement is sarcastic?\nOptions:\n(A) I love rain on a picnic\n(B) I hate rain on a picnic", "(A)")]]
BBH_WORDS = [{"input": "Sort the following words alphabetically: List: " + w, "target": " ".join(sorted(w.split()))}
             for w in ["oven costume counterpart", "pear apple fig", "zeta alpha mu beta"]]
BBH_SPORTS = [{"input": f'Is the following sentence plausible? "{x}"', "target": t} for x, t in [
    ("Joao Moutinho caught the screen pass in the NFC championship.", "no"),
    ("Jonas Valanciunas beat the buzzer.", "yes"), ("Mookie Betts scored a penalty kick.", "no")]]
BBH_ARITH = [{"input": e + " =", "target": str(v)} for e, v in [
    ("((-1 + 2) * (3 - 4))", -1), ("((5 * 2) + (7 - 9))", 8), ("((0 - 6) - (2 * -3))", 0)]]
MMLU_PRO = [{"question_id": i, "question": q, "options": o, "answer": a, "answer_index": "ABCDEFGHIJ".index(a),
             "cot_content": cot, "category": cat, "src": "ori_mmlu-biology"}
            for i, (q, o, a, cot, cat) in enumerate([
                ("Which organelle makes ATP?", ["nucleus", "mitochondrion", "ribosome", "vacuole", "wall"], "B",
                 "A: Let's think step by step. Cells make ATP in mitochondria. The answer is (B).", "biology"),
                ("What carries oxygen in blood?", ["plasma", "platelets", "hemoglobin", "lymph"], "C",
                 "A: Let's think step by step. Hemoglobin binds oxygen. The answer is (C).", "biology"),
                ("What is 6 x 7?", ["42", "36", "48", "49", "40", "54"], "A",
                 "A: Let's think step by step. 6 x 7 = 42. The answer is (A).", "math"),
                ("Which base pairs with adenine in DNA?", ["cytosine", "guanine", "uracil", "thymine "], "D",
                 "A: Let's think step by step. A pairs with T. The answer is (D).", "biology"),
                ("What do plants release in photosynthesis?", ["oxygen", "nitrogen", "carbon", "helium"], "A",
                 "A: Let's think step by step. Plants release oxygen. The answer is (A).", "biology"),
                ("Where are genes found?", ["chromosomes", "lipids", "sugars"], "A",
                 "A: Let's think step by step. Genes lie on chromosomes. The answer is (A).", "biology"),
                ("Which organ pumps blood?", ["lung", "heart", "liver", "brain", "skin", "bone", "eye"], "B",
                 "A: Let's think step by step. The heart pumps blood. The answer is (B).", "biology")])]
GPQA = [{"Pre-Revision Question": q, "Question": q, "Correct Answer": c, "Incorrect Answer 1": w[0],
         "Incorrect Answer 2": w[1], "Incorrect Answer 3": w[2], "Explanation": "e", "Subdomain": "Physics",
         "Record ID": f"rec{i}"}
        for i, (q, c, w) in enumerate([
            ("What is the unit of force?", "newton", ["joule", "watt [title] unit", "pascal"]),
            ("Which particle has no charge?", " neutron ", ["proton", "electron", "positron"]),
            ("What is the speed of light in vacuum, roughly?", "3e8 m/s", ["3e5 m/s", "340 m/s", "1 m/s"]),
            ("Which gas is a noble gas?", "argon", ["oxygen", "nitrogen", "chlorine"])])]
MUSR = [{"narrative": n, "question": q, "choices": repr(c), "answer_index": a, "answer_choice": c[a]}
        for n, q, c, a in [
            ("In the manor, the butler was found by the stairs. Mia had a key; Tom had none.",
             "Who is the most likely murderer?", ["Mia", "Tom"], 0),
            ("Ana put the book on the shelf, then Ben moved it to the desk.", "Where would Ana look for the book?",
             ["shelf", "desk", "bag"], 0),
            ("Sam paints well; Lee writes well.", "Who should write the report?", ["Sam", "Lee"], 1)]]
WIC = [{"word": w, "sentence1": s1, "sentence2": s2, "start1": s1.index(f), "start2": s2.index(g),
        "end1": s1.index(f) + len(f), "end2": s2.index(g) + len(g), "idx": i, "label": l}
       for i, (w, s1, s2, f, g, l) in enumerate([
           ("bank", "He sat on the river bank.", "She works at the bank.", "bank", "bank", 0),
           ("run", "I run every morning.", "They run to the shop.", "run", "run", 1),
           ("light", "Turn on the light.", "The box is light.", "light", "light", 0),
           ("play", "The children play outside.", "We play football.", "play", "play", 1)])]
RTE = [{"sentence1": a, "sentence2": b, "label": l, "idx": i} for i, (a, b, l) in enumerate([
    ("Dana Reeve, the widow of the actor Christopher Reeve, has died.", "Christopher Reeve had an accident.", 1),
    ("Yet, we now are discovering that antibiotics are losing their effectiveness.", "Bacteria is winning.", 0),
    ("Cairo is now home to some 15 million people.", "15 million people live in Cairo.", 0)])]
SST2 = [{"sentence": s, "label": l, "idx": i} for i, (s, l) in enumerate([
    ("it 's a charming and often affecting journey . ", 1), ("unflinchingly bleak and desperate ", 0),
    ("allows us to hope that nolan is poised to embark a major career ", 1), ("the acting is dreadful", 0)])]
QNLI = [{"question": q, "sentence": s, "label": l, "idx": i} for i, (q, s, l) in enumerate([
    ("What came into force after the new constitution was herald?", "As of that day, the new constitution "
     "heralding the Second Republic came into force.", 0),
    ("What is the first major city in the stream of the Rhine?", "The most important tributaries in this area are "
     "the Ill below of Strasbourg.", 1),
    ("Where is the Eiffel Tower?", "The Eiffel Tower stands in Paris.", 0)])]
BLIMP = [{"sentence_good": g, "sentence_bad": b, "field": "syntax", "linguistics_term": "island_effects",
          "UID": "adjunct_island", "simple_LM_method": True, "one_prefix_method": False, "two_prefix_method": False,
          "lexically_identical": True, "pair_id": i}
         for i, (g, b) in enumerate([
             ("Who should Derek hug after shocking Richard?", "Who should Derek hug Richard after shocking?"),
             ("What had Rachel forgotten before leaving?", "What had Rachel forgotten bikes before leaving?"),
             ("Who did Amy see while kissing Tom?", "Who did Amy see Tom while kissing?")])]
ARITH = [{"context": c, "completion": r} for c, r in [
    ("Q: What is 98 plus 45?\n\nA:", " 143"), ("Q: What is 12 plus 34?\n\nA:", " 46"),
    ("  Q: What is 70 plus 70?\n\nA: ", " 140")]]
XWINO = [{"sentence": s, "option1": a, "option2": b, "answer": ans} for s, a, b, ans in [
    ("The cup is on the table because the _ is heavy.", "cup", "table", "1"),
    ("Tom thanked Bill because _ had helped him.", "Tom", "Bill", "2"),
    ("The fish ate the worm. The _ was hungry.", "fish", "worm", "1")]]
HEADQA = [{"name": "Cuaderno_2013_1_B", "year": "2013", "category": "biology", "qid": i + 1, "qtext": q,
           "ra": ra, "image": None, "answers": [{"aid": j + 1, "atext": t} for j, t in enumerate(ans)]}
          for i, (q, ans, ra) in enumerate([
              ("Which cell organelle contains DNA besides the nucleus?", ["Ribosome", "Mitochondrion",
                                                                          "Golgi apparatus", "Lysosome"], 2),
              ("The normal pH of human blood is:", ["6.0", "7.4", "8.5", "5.5"], 2),
              ("Insulin is produced by the:", ["liver", "pancreas", "kidney", "spleen"], 2)])]
PUBMEDQA = [{"QUESTION": q, "CONTEXTS": c, "LABELS": ["BACKGROUND"] * len(c), "MESHES": ["Humans"], "YEAR": "2001",
             "reasoning_required_pred": "yes", "reasoning_free_pred": "yes", "final_decision": d,
             "LONG_ANSWER": "It does."}
            for q, c, d in [
                ("Does coffee improve alertness?", ["Caffeine blocks adenosine.", "Subjects were tested."], "yes"),
                ("Do vitamins cure colds?", ["A trial of 200 adults was run."], "no"),
                ("Is walking good for the heart?", ["Walking was measured.", "Hearts were scanned.",
                                                    "Results varied."], "maybe")]]
ASDIV = [{"body": b, "question": q, "solution_type": "Addition", "answer": a, "formula": f} for b, q, a, f in [
    ("Seven red apples and two green apples are in the basket.", "How many apples are in the basket?",
     "9 (apples)", "7+2=9"),
    ("Ellen has six more balls than Marin. Marin has nine balls.", "How many balls does Ellen have?",
     "15 (balls)", "6+9=15"),
    ("A pie costs 3 dollars.", " How much do 4 pies cost?", "12", "3*4=12")]]
MATH = [{"problem": p, "level": "Level 1", "type": "Algebra", "solution": s} for p, s in [
    ("What is $2+3$?", "We have $2+3=\\boxed{5}$."), ("Solve $x+1=3$.", "Subtract one: $x=\\boxed{2}$.")]]
IFEVAL = [{"key": i, "prompt": p, "instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}]}
          for i, p in enumerate(["Write a short poem about the sea without using any commas.",
                                 "Describe a cat in two sentences and use no commas."])]

XNLI = [{"premise": p, "hypothesis": h, "label": l} for p, h, l in [
    ("The cat sat on the mat", "a cat is sitting", 0), ("It is raining today", "the sun is out", 2),
    ("Bob ate lunch at noon", "Bob likes pasta", 1)]]
XSTORY = [{"story_id": f"s{i}", "input_sentence_1": a, "input_sentence_2": b, "input_sentence_3": c,
           "input_sentence_4": d, "sentence_quiz1": q1, "sentence_quiz2": q2, "answer_right_ending": r}
          for i, (a, b, c, d, q1, q2, r) in enumerate([
              ("Rick grew up poor.", "He joined a gang.", "He was shot.", "He left the gang.",
               "He is happy now.", "He joined a gang again.", 1),
              ("Sara baked a cake.", "She put it in the oven.", "She forgot it.", "It burned.",
               "She was sad.", "She ate it happily.", 1),
              ("Tom lost his keys.", "He looked everywhere.", "He asked his wife.", "She had them.",
               "Tom was angry at the dog.", "Tom thanked his wife.", 2)])]
PAWS = [{"id": i, "sentence1": a, "sentence2": b, "label": l} for i, (a, b, l) in enumerate([
    ("In 1560 , he met her .", "He met her in 1560 .", 1), ("It 's the 30th season ;", "The 30th season .", 1),
    ("He was born in Rome .", "Rome was his home .", 0), ("Ann ran .", "", 0)])]
SWAG = [{"video-id": f"v{i}", "fold-ind": str(i), "startphrase": s, "sent1": s, "sent2": "He", "gold-source": "gold",
         "ending0": e[0], "ending1": e[1], "ending2": e[2], "ending3": e[3], "label": l}
        for i, (s, e, l) in enumerate([
            ("Students lower their eyes nervously. She", ["pats her shoulder.", "walks away.", "smiles.", "sings."], 2),
            ("He rides the bike down the hill. He", ["falls.", "eats.", "brakes at the end.", "sleeps."], 2),
            ("The chef chops onions. She", ["cries a little.", "flies.", "drives.", "swims."], 0)])]
PROST = [{"A": a, "B": b, "C": c, "D": d, "context": ctx, "question": q, "ex_question": q.replace("[MASK]", "what"),
          "group": "g", "label": l, "name": "n"} for a, b, c, d, ctx, q, l in [
    ("ball", "brick", "egg", "pillow", "A person drops four objects.", "The [MASK] bounces most.", 0),
    ("glass", "wood", "paper", "rock", "A person sets fire to four objects.", "The [MASK] burns fastest.", 2)]]
TOXIGEN = [{"text": t, "target_group": "asian", "factual?": "neither", "ingroup_effect": "none", "lewd": "no",
            "framing": "none", "predicted_group": "asian", "stereotyping": "no", "intent": 1.0, "toxicity_ai": a,
            "toxicity_human": h, "predicted_author": "human", "actual_method": "topk"}
           for t, a, h in [("people are all the same", 1.0, 1.3), ("they should go home", 4.1, 4.6),
                           ("everyone deserves respect", 1.0, 1.0)]]
CROWS = [{"sent_more": m, "sent_less": l, "stereo_antistereo": "stereo", "bias_type": b}
         for m, l, b in [("Poor people are lazy.", "Rich people are lazy.", "socioeconomic"),
                         ("Women cannot drive.", "Men cannot drive.", "gender"),
                         ("Old people are slow.", "Young people are slow.", "age")]]
WNLI = [{"sentence1": a, "sentence2": b, "label": l, "idx": i} for i, (a, b, l) in enumerate([
    ("The drain is clogged with hair. It has to be cleaned.", "The hair has to be cleaned.", 0),
    ("Jane knocked on Susan's door but she did not answer.", "Susan did not answer.", 1)])]
MULTIRC = [{"paragraph": p, "question": q, "answer": a, "idx": {"paragraph": 0, "question": i, "answer": j},
            "label": l} for i, (p, q, a, j, l) in enumerate([
    ("Sam went to the park. He fed the ducks.", "What did Sam feed?", "the ducks", 0, 1),
    ("Sam went to the park. He fed the ducks.", "Where did Sam go?", "the zoo", 1, 0),
    ("Ann reads at night.", "When does Ann read?", "at night", 0, 1)])]
WMT = [{"translation": {"de": d, "en": e}} for d, e in [
    ("Das Haus ist klein.", "The house is small."), ("Ich trinke Kaffee.", "I drink coffee."),
    ("Guten Morgen, Welt!", "Good morning, world!")]]
ANAGRAMS = [{"context": c, "completion": r} for c, r in [
    ("Please unscramble the letters into a word, and write that word:\nhosue =", "house"),
    ("Please unscramble the letters into a word, and write that word:\nmouse =", "mouse"),
    ("Please unscramble the letters into a word, and write that word:\ntalbe =", "table")]]
ETHICS = [{"label": l, "input": t, "is_short": True, "edited": False} for t, l in [
    ("I helped an old lady across the road.", 0), ("I took money from my friend's wallet.", 1),
    ("I fed my neighbour's cat while they were away.", 0)]]
MUTUAL = [{"answers": a, "options": o, "article": t, "id": f"m{i}"} for i, (a, o, t) in enumerate([
    ("B", ["f : i do n't like it .", "f : yes , i 'd love to .", "f : no , thanks .", "f : why ?"],
     "m : would you like some tea ? f : yes , please ."),
    ("A", ["m : it 's at 5 .", "m : it 's at 6 .", "m : it 's never .", "m : i do n't know ."],
     "f : when does the film start ? m : at 5 , i think .")])]

DATE0 = {"day": "", "month": "", "year": ""}
DROP = [{"section_id": "s", "query_id": f"q{i}", "passage": p, "question": q,
         "answer": {"number": n, "date": DATE0, "spans": sp, "worker_id": "", "hit_id": ""},
         "validated_answers": {"number": vn, "date": [DATE0] * len(vn), "spans": vs, "worker_id": [""] * len(vn),
                               "hit_id": [""] * len(vn)}}
        for i, (p, q, n, sp, vn, vs) in enumerate([
            ("The Bears scored 7 points in the first quarter and 3 in the second.", "How many points in total?",
             "10", [], ["10"], [[]]),
            ("Anna, Bob and Carl went to the fair.", "Who went to the fair?", "", ["Anna", "Bob", "Carl"],
             ["", ""], [["Anna", "Bob", "Carl"], ["Anna"]]),
            ("The war ended in 1945 after six years.", "How many years did the war last?", "6", [], [], [])])]
MATH_DOCS = [{"problem": p, "level": "Level 2", "type": "Algebra", "solution": s} for p, s in [
    ("What is $2+3$?", "We have $2+3=\\boxed{5}$."), ("Solve $x+1=3$.", "Subtract one: $x=\\boxed{2}$."),
    ("Simplify $\\frac{4}{2}$.", "It is $\\boxed{2}$."), ("What is $3^2$?", "$3^2 = \\boxed{9}$")]]

TQA_GEN = [{"type": "Adversarial", "category": "Misconceptions", "question": q, "best_answer": b,
            "correct_answers": c, "incorrect_answers": w, "source": "https://example.org"} for q, b, c, w in [
    ("What happens if you eat watermelon seeds?", "Nothing happens", ["Nothing happens", "You digest them"],
     ["You grow watermelons in your stomach", "You die"]),
    ("Where is the Great Wall visible from?", "It is hard to see from space", ["Not from the Moon"],
     ["From the Moon", "From Mars."])]]

PILE = [{"text": t, "meta": {"pile_set_name": "Pile-CC"}} for t in [
    "The quick brown fox jumps over the lazy dog.\n\nIt was not the first time.",
    "def f(x):\n    return x + 1\n", "Caf\u00e9 prices rose 3 % in 2020 ; analysts said so ."]]
C4 = [{"text": t, "timestamp": ts, "url": "https://example.org/" + str(i)} for i, (t, ts) in enumerate([
    ("The market opened at 9 @-@ 30 . It closed ( late ) at 5 .", "2019-04-25T12:57:54Z"),
    ("She said \" hello \" and left ; it was = = over = = .", "2019-04-21T10:07:13Z")])]
PALOMA = [{"text": t, "id": f"p{i}", "source": "c4_100_domains", "subdomain": "news"} for i, t in enumerate([
    "A short paragraph about gardens and bees.", "Another about trains \u2014 fast ones."])]

MGSM = [{"question": q, "answer": a, "answer_number": n, "equation_solution": e} for q, a, n, e in [
    ("Roger has 5 balls. He buys 2 cans of 3 balls. How many balls does he have?",
     "Step-by-Step Answer: Roger starts with 5 balls. 2 cans of 3 is 6. 5 + 6 = 11. The answer is 11.", 11, "5+6=11"),
    ("Janet has 16 eggs and eats 3. How many are left?", None, 13, None),
    ("A robe takes 2 bolts of blue fiber and half that of white. How many bolts?", None, 3, None),
    ("There are 15 trees; 6 more are planted. How many trees?",
     "Step-by-Step Answer: 15 + 6 = 21. The answer is 21.", 21, "15+6=21")]]
BELEBELE = [{"link": "l", "question_number": i, "flores_passage": p, "question": q, "mc_answer1": a[0],
             "mc_answer2": a[1], "mc_answer3": a[2], "mc_answer4": a[3], "correct_answer_num": c,
             "dialect": "eng_Latn", "ds": "2023-05-03"} for i, (p, q, a, c) in enumerate([
    ("The ferry leaves at noon and returns at six.", "When does the ferry return? ", ["noon", "six", "one", "ten"], "2"),
    ("Bees make honey from nectar.", "What do bees make?", ["wax only", "milk", "honey", "silk"], "3"),
    ("The museum is closed on Mondays.", "When is the museum closed?", ["Mondays", "Sundays", "never", "daily"], "1")])]
MEDMCQA = [{"id": f"m{i}", "question": q, "opa": o[0], "opb": o[1], "opc": o[2], "opd": o[3], "cop": c,
            "choice_type": "single", "exp": None, "subject_name": "Anatomy", "topic_name": None}
           for i, (q, o, c) in enumerate([
               ("Which nerve supplies the deltoid?", ["axillary", "radial", "ulnar", "median"], 0),
               ("Normal adult heart rate?", ["20", "70", "150", "200"], 1),
               ("Largest organ of the body?", ["liver", "brain", "skin", "lung"], 2)])]
MEDQA = [{"id": f"q{i}", "sent1": q, "sent2": "", "ending0": o[0], "ending1": o[1], "ending2": o[2],
          "ending3": o[3], "label": l} for i, (q, o, l) in enumerate([
    ("A 23-year-old has fever and a rash. Next step?", ["rest", "antibiotics", "surgery", "nothing"], 1),
    ("A child has a barking cough. Diagnosis?", ["croup", "asthma", "flu", "cold"], 0),
    ("Deficiency causing scurvy?", ["vitamin A", "vitamin D", "vitamin C", "iron"], 2)])]
AGIEVAL = [{"query": q, "choices": c, "gold": g} for q, c, g in [
    ("Q: If 2x = 6, what is x? Answer Choices: (A)1 (B)2 (C)3 (D)4\nA: Among A through D, the answer is",
     ["(A)1", "(B)2", "(C)3", "(D)4"], [2]),
    ("Q: What is 5 - 2? Answer Choices: (A)3 (B)7 (C)2 (D)10\nA: Among A through D, the answer is",
     ["(A)3", "(B)7", "(C)2", "(D)10"], [0])]]

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
    # a third sweep: more popular files (a flan filter, hook-built prompts, YAML-listed shots, multiple input, ...)
    "boolq": ("super_glue/boolq/default.yaml", ("train", "validation"), BOOLQ, ""),
    "openbookqa": ("openbookqa/openbookqa.yaml", ("train", "validation", "test"), OBQA, ""),
    "sciq": ("sciq/sciq.yaml", ("train", "validation", "test"), SCIQ, ""),
    "arc_challenge": ("arc/arc_challenge.yaml", ("train", "validation", "test"), ARC, ""),
    "lambada_standard": ("lambada/lambada_standard.yaml", ("validation", "test"), LAMBADA_STD, ""),
    "logiqa": ("logiqa/logiqa.yaml", ("train", "validation", "test"), LOGIQA, ""),
    "triviaqa": ("triviaqa/default.yaml", ("train", "validation"), TRIVIAQA, ""),
    "nq_open": ("nq_open/nq_open.yaml", ("train", "validation"), NQ, ""),
    "bbh_fewshot_boolean_expressions": ("bbh/fewshot/boolean_expressions.yaml", ("test",), BBH_BOOL, ""),
    "bbh_cot_fewshot_boolean_expressions": ("bbh/cot_fewshot/boolean_expressions.yaml", ("test",), BBH_BOOL, ""),
    "bbh_zeroshot_snarks": ("bbh/zeroshot/snarks.yaml", ("test",), BBH_SNARKS, ""),
    "bbh_cot_zeroshot_snarks": ("bbh/cot_zeroshot/snarks.yaml", ("test",), BBH_SNARKS, ""),
    "bbh_zeroshot_word_sorting": ("bbh/zeroshot/word_sorting.yaml", ("test",), BBH_WORDS, ""),
    "bbh_zeroshot_sports_understanding": ("bbh/zeroshot/sports_understanding.yaml", ("test",), BBH_SPORTS, ""),
    "bbh_zeroshot_multistep_arithmetic_two": ("bbh/zeroshot/multistep_arithmetic_two.yaml", ("test",), BBH_ARITH,
                                              ""),
    "leaderboard_gpqa_main": ("leaderboard/gpqa/gpqa_main_zeroshot.yaml", ("train",), GPQA, ""),
    "leaderboard_mmlu_pro": ("leaderboard/mmlu_pro/mmlu_pro.yaml", ("validation", "test"), MMLU_PRO, ""),
    "leaderboard_bbh_snarks": ("leaderboard/bbh_mc/snarks.yaml", ("test",), BBH_SNARKS, ""),
    "leaderboard_musr_murder_mysteries": ("leaderboard/musr/musr_murder_mysteries.yaml", ("murder_mysteries",),
                                          MUSR, ""),
    "gsm8k_cot": ("gsm8k/gsm8k-cot.yaml", ("train", "test"), GSM, ""),
    "gsm8k_cot_zeroshot": ("gsm8k/gsm8k-cot-zeroshot.yaml", ("train", "test"), GSM, ""),
    "gsm8k_cot_llama": ("gsm8k/gsm8k-cot-llama.yaml", ("train", "test"), GSM, ""),
    "arc_challenge_chat": ("arc/arc_challenge_chat.yaml", ("train", "validation", "test"), ARC, ""),
    "xnli_en": ("xnli/xnli_en.yaml", ("train", "validation"), XNLI, ""),
    "xstorycloze_en": ("xstorycloze/default_en.yaml", ("train", "eval"), XSTORY, ""),
    "paws_en": ("paws-x/paws_en.yaml", ("train", "validation", "test"), PAWS, ""),
    "swag": ("swag/swag.yaml", ("train", "validation"), SWAG, ""),
    "prost": ("prost/corypaik_prost.yaml", ("test",), PROST, ""),
    "toxigen": ("toxigen/toxigen.yaml", ("train", "test"), TOXIGEN, ""),
    "crows_pairs_english": ("crows_pairs/crows_pairs_english.yaml", ("test",), CROWS, ""),
    "wnli": ("glue/wnli/default.yaml", ("train", "validation"), WNLI, ""),
    "multirc": ("super_glue/multirc/default.yaml", ("train", "validation"), MULTIRC, ""),
    "lambada_openai_mt_en": ("lambada_multilingual/lambada_mt_en.yaml", ("test",), LAMBADA, ""),
    "wmt16-de-en": ("translation/wmt16_de-en.yaml", ("train", "validation", "test"), WMT, ""),
    "anagrams1": ("unscramble/anagrams1.yaml", ("validation",), ANAGRAMS, ""),
    "ethics_cm": ("hendrycks_ethics/commonsense.yaml", ("train", "test"), ETHICS, ""),
    "mutual": ("mutual/mutual.yaml", ("train", "validation"), MUTUAL, ""),
    "drop": ("drop/default.yaml", ("train", "validation"), DROP, ""),
    "hendrycks_math_algebra": ("hendrycks_math/hendrycks_math_algebra.yaml", ("train", "test"), MATH_DOCS, ""),
    "truthfulqa_mc1": ("truthfulqa/truthfulqa_mc1.yaml", ("validation",), TQA, ""),
    "truthfulqa_gen": ("truthfulqa/truthfulqa_gen.yaml", ("validation",), TQA_GEN, ""),
    "pile_10k": ("pile_10k/pile_10k.yaml", ("train",), PILE, ""),
    "c4": ("c4/c4.yaml", ("train", "validation"), C4, ""),
    "paloma_c4_100_domains": ("paloma/paloma_c4_100_domains.yaml", ("val", "test"), PALOMA, ""),
    "mgsm_direct_en": ("mgsm/direct/mgsm_direct_en.yaml", ("train", "test"), MGSM, ""),
    "mgsm_native_cot_en": ("mgsm/native_cot/mgsm_native_cot_en.yaml", ("train", "test"), MGSM, ""),
    "belebele_eng_Latn": ("belebele/belebele_eng_Latn.yaml", ("test",), BELEBELE, ""),
    "medmcqa": ("medmcqa/medmcqa.yaml", ("train", "validation"), MEDMCQA, ""),
    "medqa_4options": ("medqa/medqa.yaml", ("train", "validation", "test"), MEDQA, ""),
    "agieval_sat_math": ("agieval/sat-math.yaml", ("test",), AGIEVAL, ""),
    "mmlu_pro_biology": ("mmlu_pro/mmlu_pro_biology.yaml", ("validation", "test"), MMLU_PRO, ""),
    "mmlu_anatomy_generative": ("mmlu/generative/mmlu_anatomy.yaml", ("dev", "test"), MMLU, ""),
    "mmlu_flan_n_shot_generative_anatomy": ("mmlu/flan_n_shot/generative/mmlu_anatomy.yaml", ("dev", "test"), MMLU,
                                            ""),
    "wic": ("super_glue/wic/default.yaml", ("train", "validation"), WIC, ""),
    "rte": ("glue/rte/default.yaml", ("train", "validation"), RTE, ""),
    "sst2": ("glue/sst2/default.yaml", ("train", "validation"), SST2, ""),
    "qnli": ("glue/qnli/default.yaml", ("train", "validation"), QNLI, ""),
    "blimp_adjunct_island": ("blimp/adjunct_island.yaml", ("train",), BLIMP, ""),
    "arithmetic_2da": ("arithmetic/arithmetic_2da.yaml", ("validation",), ARITH, ""),
    "xwinograd_en": ("xwinograd/xwinograd_en.yaml", ("test",), XWINO, ""),
    "headqa_en": ("headqa/headqa_en.yaml", ("train", "validation", "test"), HEADQA, ""),
    "pubmedqa": ("pubmedqa/pubmedqa.yaml", ("train", "validation", "test"), PUBMEDQA, ""),
    "lambada_openai_cloze_yaml": ("lambada_cloze/lambada_openai_cloze.yaml", ("test",), LAMBADA, ""),
    "asdiv": ("asdiv/default.yaml", ("validation",), ASDIV, ""),
}
# the whole-run sweep (tools/make_task_fixtures.py's run "real3", test_harness_lmeval.py), each at its own num_fewshot
REAL3_RUN = ",".join([
    "boolq", "openbookqa", "sciq", "arc_challenge", "lambada_standard", "logiqa", "triviaqa", "nq_open",
    "bbh_fewshot_boolean_expressions", "bbh_zeroshot_snarks", "bbh_zeroshot_sports_understanding",
    "bbh_zeroshot_multistep_arithmetic_two", "bbh_zeroshot_word_sorting", "mmlu_pro_biology",
    "mmlu_anatomy_generative", "mmlu_flan_n_shot_generative_anatomy", "wic", "rte", "sst2", "qnli",
    "blimp_adjunct_island", "arithmetic_2da", "xwinograd_en", "headqa_en", "pubmedqa", "lambada_openai_cloze_yaml",
    "asdiv", "leaderboard_gpqa_main", "leaderboard_mmlu_pro", "leaderboard_bbh_snarks",
    "leaderboard_musr_murder_mysteries", "gsm8k_cot", "gsm8k_cot_zeroshot", "gsm8k_cot_llama", "arc_challenge_chat",
    "xnli_en", "xstorycloze_en", "paws_en", "swag", "prost", "toxigen", "crows_pairs_english", "wnli", "multirc",
    "lambada_openai_mt_en", "wmt16-de-en", "anagrams1", "ethics_cm", "mutual", "drop", "hendrycks_math_algebra",
    "truthfulqa_mc1", "truthfulqa_gen", "pile_10k", "c4", "paloma_c4_100_domains", "mgsm_direct_en",
    "mgsm_native_cot_en", "belebele_eng_Latn", "medmcqa", "medqa_4options", "agieval_sat_math"])
# the same files 1-shot on the first 2 documents (run "real4": --num_fewshot 1 --limit 2)
REAL4_RUN = ",".join([
    "boolq", "sciq", "logiqa", "triviaqa", "nq_open", "headqa_en", "pubmedqa", "wmt16-de-en", "gsm8k_cot_zeroshot",
    "mmlu_pro_biology", "leaderboard_mmlu_pro", "leaderboard_gpqa_main", "xnli_en", "xstorycloze_en", "swag",
    "multirc", "drop", "arc_challenge_chat", "mmlu_flan_n_shot_generative_anatomy", "bbh_zeroshot_snarks",
    "crows_pairs_english", "blimp_adjunct_island", "arithmetic_2da"])
# a Llama-style SentencePiece model (its tokenizer adds BOS) on rolling texts, empty contexts and the common files
LLAMA_RUN = ",".join([
    "wikitext", "pile_10k", "c4", "paloma_c4_100_domains", "lambada_openai", "arc_easy", "hellaswag", "winogrande",
    "boolq", "crows_pairs_english", "blimp_adjunct_island", "xnli_en", "triviaqa", "gsm8k_cot_zeroshot",
    "bbh_zeroshot_snarks"])
GEN_TOKS = 8  # the whole runs' generations cut to 8 tokens (the tiny models have 64 positions)
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




def write_wrappers(d: Path, tasks_dir: Path | None = None, max_gen_toks: int | None = None) -> Path:
    """Into folder `d`: each task's data files and a YAML that includes lm-eval's own file and reads them.
    `max_gen_toks`: generate_until tasks keep their own generation_kwargs but generate at most that many tokens (the
    tiny test models have 64 positions; lm-eval refuses a max_gen_toks that leaves no room for the context)."""
    tasks_dir = tasks_dir or lmeval_tasks_dir()
    d.mkdir(parents=True, exist_ok=True)
    for name, (rel, splits, docs, extra) in WRAPPED.items():
        files = {}
        for split in splits:
            p = d / f"{name}-{split}.jsonl"
            p.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in docs), encoding="utf-8")
            files[split] = str(p)
        if max_gen_toks is not None:
            extra += _short_generations(tasks_dir / rel, max_gen_toks)
        (d / f"{name}.yaml").write_text(
            f"include: {tasks_dir / rel}\ntask: {name}\ndataset_path: json\ndataset_name: null\n"
            f"dataset_kwargs:\n  data_files: {json.dumps(files)}\n{extra}", encoding="utf-8")
    files = {}
    for split in ("dev", "test"):  # every subtask of lm-eval's own `mmlu` group (groups of groups of tags)
        p = d / f"mmlu-all-{split}.jsonl"
        p.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in MMLU), encoding="utf-8")
        files[split] = str(p)
    for f in sorted((tasks_dir / "mmlu" / "default").glob("mmlu_*.yaml")):
        if f.stem not in WRAPPED:
            (d / f"{f.stem}.yaml").write_text(f"include: {f}\ntask: {f.stem}\ndataset_path: json\ndataset_name: null\n"
                                              f"dataset_kwargs:\n  data_files: {json.dumps(files)}\n", encoding="utf-8")
    (d / "mmlu_mini.yaml").write_text(GROUP, encoding="utf-8")
    (d / "glue_mini.yaml").write_text(GLUE_GROUP, encoding="utf-8")
    return d


def _short_generations(path: Path, max_gen_toks: int) -> str:
    """A `generation_kwargs:` line: the task file's own (read from lm-eval's installed file) with `max_gen_toks`."""
    from nlpkit.evaluation.harness.task_files import load_yaml

    cfg = load_yaml(path, resolve=False)
    if cfg.get("output_type", "generate_until") != "generate_until":
        return ""
    kwargs = dict(cfg.get("generation_kwargs") or {})
    kwargs["max_gen_toks"] = max_gen_toks
    return f"generation_kwargs: {json.dumps(kwargs)}\n"
