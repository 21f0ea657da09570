"""The examiner's prompts, from AutoBench-V (paper 002) Appendix F, Figures 22-26.

Placeholders are ``{name}`` and filled by :func:`render` (no ``str.format``,
so the JSON braces of Figure 25 stay literal). Changes from the paper, each
needed for the pipeline to be checkable:

* Figure 22 hard-codes "basic understanding", 4 and 6: here the capability,
  its definition, ``n`` and ``m`` are placeholders.
* Figure 24 elides the difficulty definitions ("...") - they are filled from
  Appendix C.1; the observer's-perspective rule is Appendix C's last paragraph.
* Figure 25 allows true/false questions; exact A-D balancing needs four
  options, so only four-option questions are asked for. Its elided "[System]
  ... Introduction" wording is kept as printed.
* The self-validation prompts (§3.3, TIFA-style) are not printed in the paper;
  they are written here.
"""

from __future__ import annotations

import re

#: The paper's five capabilities (Appendix B "Definition and Goal"; basic
#: understanding as worded in Figure 22).
CAPABILITIES: dict[str, str] = {
    "basic": (
        "Basic Understanding: This involves recognizing and identifying individual objects, "
        "characters, and scenes within an image. It includes tasks like detecting the presence of "
        "specific items (e.g., cars, trees, people), distinguishing between different types of "
        "objects, and understanding the general context of the scene (e.g., a park, a city "
        "street). The goal is to accurately label all relevant elements in the image, providing "
        "a foundation for more advanced analysis."
    ),
    "spatial": (
        "Spatial Understanding: This refers to the interpretation of the spatial arrangement and "
        "positioning of objects within an image. The goal is to comprehend both two-dimensional "
        "and three-dimensional relationships, determining which objects are in the foreground or "
        "background, assessing their relative sizes and orientations, and understanding how they "
        "are positioned within the scene."
    ),
    "semantic": (
        "Semantic Understanding: This involves interpreting the higher-level meaning and "
        "relationships within an image. The goal is to move beyond simple object identification "
        "to understand the roles and interactions between objects, such as recognizing that a "
        "person is riding a bike or that two people are engaged in conversation."
    ),
    "reasoning": (
        "Reasoning Capacity: This involves interpreting and analyzing the relationships and "
        "logical connections between different elements within an image. The goal is to infer "
        "potential outcomes, understand causal relationships, and make predictions about what "
        "might happen next based on visual cues."
    ),
    "atmospheric": (
        "Atmospheric Understanding: This focuses on grasping the mood, tone, and emotional "
        "ambiance conveyed by an image. The goal is to interpret not just what is depicted or how "
        "elements are arranged, but also how the scene feels and the emotional resonance it "
        "conveys to the viewer."
    ),
}

LEVELS = ("easy", "medium", "hard")

#: Appendix C.1: what each level means for an image description.
DESCRIPTION_LEVELS = {
    "easy": "Easy: very simple elements, focusing on single, easily recognizable objects placed "
    "against a plain or neutral background, e.g. \"a red apple on a white background.\"",
    "medium": "Medium: scenes where the required elements interact with their environment "
    "naturally but uncomplicatedly; multiple common objects in a familiar context, e.g. \"a cup "
    "on a table in a well-lit kitchen.\"",
    "hard": "Hard: multiple elements interacting with each other in a more complex environment, "
    "with varied perspectives, detailed textures or lighting conditions, e.g. \"a reflection of "
    "a cat looking out of a rain-soaked window, with a cityscape in the background at dusk.\"",
}

# Figure 22 (capability, counts and definition as placeholders).
ASPECTS = """[System]
You are an AI assistant specializing in designing prompts to test Large Vision-Language Models (LVLMs). Your task is to create meticulously {aspect_count} fined-grained aspects that evaluate LVLMs {capability} of images.
[Background] Large Vision-Language Models are AI systems capable of understanding and analyzing images. Testing these models across various competencies is crucial for assessing their performance, limitations, and potential biases. The aspects you create will be used to challenge and evaluate LVLMs.
[Instruction]
1. {definition}
2. Come up with {n_general} general aspects according to the {capability}.
3. Then Create {m_fine} fined-grained aspects within the {capability} for each general aspect, do not go beyond. You can consider the definition of the {capability} above.
4. Please list the aspects without using numbered lists. 5. Let's think step by step.
[Output Format]
Please strictly respond in the following format:
General Aspect: [Aspect]
Fined-grained Aspect: [Aspect]
Introduction: [Introduction]"""

# Figure 23.
GUIDELINE = """[System]
You are an advanced AI simulation assistant specializing in crafting precise prompts for image generation models.
[Instruction] I will provide you with an aspect for image generation. Your task is to create a detailed instruction on how to incorporate this aspect into an image generation prompt. This instruction should guide an AI to produce a prompt that will result in a image.
Here are two examples to guide you:
...If the aspect is Foreground vs. Background, then the prompt should have what's in the foreground and what's in the background.
...If the aspect is Relative Size Estimation, then you need to include the size of one thing compared to another.
The aspect we'll focus on is: {aspect}, and the introduction is: {introduction}
When crafting your instruction, consider the following:
1. Be specific about how the aspect should be represented visually, similar to the examples provided.
2. Provide clear guidelines on how to balance different elements within the image.
3. Include tips on avoiding common pitfalls or misinterpretations related to this aspect.
Remember, the goal is to instruct an AI on creating a prompt that will generate a single, coherent image. Your instruction should be comprehensive enough to ensure the final prompt will produce a high-quality, well-integrated result.
[Output Format]
Aspect: {aspect}
Introduction: {introduction}
Guidance: [Provide your instruction directly, written in a clear, authoritative tone. Do not include any explanations, disclaimers, or additional commentary outside of the instruction itself. Similar to the example given above, do not divide it into sections.]"""

# Figure 24 (item 4 filled from Appendix C.1; observer rule from Appendix C).
DESCRIPTION = """[System]
You are an AI assistant tasked with converting user inputs and their descriptions into suitable prompts for a text-to-image model. These prompts will generate images to test the capabilities of large vision language models (LVLMs).
[Background] Large Vision Language Models (LVLMs) are AI systems proficient in interpreting and analyzing images. Evaluating these models across different competencies is essential to understanding their performance, limitations, and potential biases. The prompts you create will be used to generate images through text-to-image models, which will then be used to challenge and evaluate LVLMs.
[Instruction]
1.Carefully analyze the given aspect: {aspect}, its introduction: {introduction} and prompt generation guidance: {guidance}
2.Generate a suitable prompt based on the provided aspect and introduction for the text-to-image model to create an image. Ensure that the prompt is composed of simple phrases, avoiding overly complex descriptions, and is clear enough. If you deem the description irrelevant to the test content, do not generate a related prompt.
3.Consider including elements that might be particularly challenging for LVLMs, such as unusual combinations, abstract concepts, or subtle details.
4.We categorize the difficulty of prompts into easy, medium, and hard: {level_definitions} Describe any left/right or front/back relation from the perspective of an observer of the picture.
5.Provide one overarching topic word that encapsulates the essence of your description.
6.List 4-6 key words that are closely related to your description and crucial for understanding the image.
7.Avoid using the following words in your new description: {used_words_str}
8.The required difficulty level is: {level}
9.Please use clear and accurate words, clear logic flow, do not use too abstract words. Word Choice: Word choice matters. More specific synonyms work better in many circumstances. Instead of big, try tiny, huge, gigantic, enormous, or immense. Plural words and Collective Nouns: Plural words leave a lot to chance. Try specific numbers. "Three cats" is more specific than "cats." Collective nouns also work, "flock of birds" instead of "birds." Focus on What You Want: It is better to describe what you want instead of what you don't want. If you ask for a party with "no cake," your image will probably include a cake. Try to be clear about any context or details that are important to you. Think about: Subject: person, animal, character, location, object Medium: photo, painting, illustration, sculpture, doodle, tapestry Environment: indoors, outdoors, on the moon, underwater, in the city Lighting: soft, ambient, overcast, neon, studio lights Color: vibrant, muted, bright, monochromatic, colorful, black and white, pastel Mood: sedate, calm, raucous, energetic Composition: portrait, headshot, closeup, birds-eye view But don't write it directly in colon form, but express it normally in a sentence.
[Output Format]
Please strictly respond in the following format:
Aspect: {aspect}
Prompt: [Your detailed image description]
Topic word: [One word that captures the essence of the description]
Key word: [Word1, Word2, Word3,...]"""

# Self-validation, step 1 (§3.3; TIFA-style questions from the description only).
VALIDATION_QUESTIONS = """[System]
You are an AI assistant that checks whether a generated image matches the description it was drawn from.
[Instruction]
Read the image description below and write {n_questions} simple yes/no questions that can each be checked by looking at the image, one per concrete element of the description (an object, its colour, count, position, or an action), for example "Is there a wooden chair in the image?". Write every question so that its correct answer for an image that follows the description is "yes".
Image description: {description}
[Output Format]
Please directly output the questions in the following JSON format, without any other information:
{"questions": ["[question 1]", "[question 2]"]}"""

# Self-validation, step 2: one question, answered on the image.
VALIDATION_ANSWER = """Look at the image and answer the question with a single word, yes or no.
Question: {question}"""

# Figure 25 (four-option questions only; see the module docstring).
QA = """[System] You are an AI assistant tasked with converting user inputs and their descriptions into suitable questions to test the Large Vision-Language Model's (LVLM) abilities in given aspects.
[Background] Large Vision-Language Models (LVLMs) are AI systems proficient in interpreting and analyzing images. Evaluating these models across different competencies is essential to understanding their performance, limitations, and potential biases. We will provide you with a prompt to generate an image, which will create a specific image. You can then formulate questions about this image based on the prompt. The questions you create will be used to challenge and evaluate LVLMs based on generated images.
[Instruction]
- Carefully analyze the given aspect and its Introduction: Aspect:{aspect}. Introduction: {introduction}
- Generate a suitable question based on the provided image generation prompt, and aspect to test the LVLM's ability in the given aspect. Ensure that the question is related to the prompt of the image and is of moderate difficulty.
- We categorize the difficulty of questions into easy, medium, and hard. For easy difficulty, please formulate questions based solely on very simple details from the image generation prompt, ensuring they adhere to the scope of the aspect in question. For medium difficulty, ensure the question is challenging but not overly complex, involving common scenes and requiring some level of inference or detailed observation. For hard difficulty, consider incorporating elements that may be particularly challenging for LVLMs, such as unusual combinations or subtle details, while keeping the question clear and relevant, and ensure it is more demanding than the medium level.
- Avoid using overly complicated language or details unrelated to the image in the questions.
- When generating problems of different difficulty, please combine the current specific aspect.
- Due to potential discrepancies in image generation, we have detected the following errors:{elements}. Please avoid referencing these elements in your questions. If the prompt for generating the image does not describe in detail what the specific looks like, please do not ask related questions.
- The required difficulty level is:{level}
- Please generate a four-option single-choice question. Image generation prompt:{prompt}
- The answers in the options need to be differentiated to a certain extent. There cannot be a situation where multiple options meet the requirements of the question. There can only be one answer that meets the question.
Aspect:{aspect}
[Output Format]
Please directly output the generated question in the following JSON format:
{
  "question": "[your question]",
  "options": {
    "A": "[Option A]",
    "B": "[Option B]",
    "C": "[Option C]",
    "D": "[Option D]"
  },
  "reference_answer": "A or B or C or D"
}
Without any other information."""

# Figure 26: the candidate's prompt. {options} lists "A. ..." lines.
ANSWER = """In order to test your ability with pictures, we have a question about {aspect} area. Please answer based on your knowledge in this area and your understanding of pictures. Given the image below, answer the questions: {question} based on the image.
{options}
Please give the final answer strictly follow the format [[A]] (Strictly add [[]] to the choice, and the content in the brackets should be the choice such as A, B, C, D) and provide a brief explanation of your answer. Directly output your answer in this format and give a brief explanation."""

# §4.2 examiner-bias check: the description replaces the image.
ANSWER_NO_IMAGE = """In order to test your ability with pictures, we have a question about {aspect} area. Please answer based on your knowledge in this area and your understanding of pictures. You cannot see the image; here is the description it was drawn from: {description}
Given this description, answer the questions: {question}
{options}
Please give the final answer strictly follow the format [[A]] (Strictly add [[]] to the choice, and the content in the brackets should be the choice such as A, B, C, D) and provide a brief explanation of your answer. Directly output your answer in this format and give a brief explanation."""

#: Appended to a prompt whose previous answer could not be used, so a retry
#: is a different request (and a greedy model can answer differently).
RETRY_NOTE = "\n[Note] Your previous answer could not be used ({reason}). Follow the output format exactly."

_FIELD = re.compile(r"\{([a-z_]+)\}")


def render(template: str, **values: object) -> str:
    """Fill ``{name}`` fields present in ``values``; other braces stay literal."""
    return _FIELD.sub(lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0), template)


def capability_definition(capability: str, definition: str | None = None) -> tuple[str, str]:
    """(name, definition) for one of :data:`CAPABILITIES` or a user's own capability.

    Raises:
        ValueError: a custom capability without a definition.
    """
    key = capability.strip().lower().replace(" understanding", "").replace(" capacity", "")
    if definition:
        return capability.strip(), definition.strip()
    if key in CAPABILITIES:
        text = CAPABILITIES[key]
        return text.split(":", 1)[0].strip().lower(), text
    raise ValueError(
        f"capability: expected one of {', '.join(CAPABILITIES)} or any text together with a "
        f"definition (--definition); got {capability!r} without a definition"
    )
